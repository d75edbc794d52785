"""pytest plugin: every rule of every collected `.rules` file is a test item, verified.

Registered through the `pytest11` entry point, so `pytest rules/` runs `ngrules.verify` on each
rule and reports it by name, with the shrunk counterexample when it fails. Only files ending in
`.rules` are touched; ngrules itself is imported only when such a file is collected.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ngrules.verification.profiles import register_profiles

register_profiles()  # so `pytest rules/ --hypothesis-profile=ci` works outside tests/


def pytest_addoption(parser) -> None:
    group = parser.getgroup("ngrules")
    group.addoption(
        "--ngrules-examples",
        type=int,
        default=None,
        help="instances each rule must fire on (default: the hypothesis profile's max_examples)",
    )


def pytest_collect_file(file_path: Path, parent):
    if file_path.suffix == ".rules":
        return RulesFile.from_parent(parent, path=file_path)
    return None


class RuleVerificationFailed(Exception):
    """A rule did not verify; the message is its verdict with the counterexample."""


class RuleLoops(UserWarning):
    """The rule alone does not terminate: a warning, not a failure (it may be sound)."""


def outcome(verdict) -> None:
    """A verdict as a pytest outcome: wrong and ill-formed fail, loops warns, unverified is
    skipped with its reason, verified and proved pass."""
    import warnings

    if verdict.failed:
        raise RuleVerificationFailed(str(verdict))
    if verdict.status == "loops":
        warnings.warn(RuleLoops(verdict.headline), stacklevel=2)
    elif verdict.status == "unverified":
        pytest.skip(f"unverified: {verdict.reason}")


class RulesFile(pytest.File):
    """A `.rules` file: one item per rule written in it (imported rules belong to their file)."""

    def collect(self):
        from ngrules.errors import NgrulesError
        from ngrules.lang.loader import load_rules

        try:
            ruleset = load_rules(self.path)
        except NgrulesError as e:
            raise self.CollectError(str(e)) from None
        here = self.path.resolve()
        for rule in ruleset.rules:
            if rule.span is None or Path(rule.span.file).resolve() == here:
                yield RuleItem.from_parent(self, name=rule.name, rule=rule, ruleset=ruleset)


class RuleItem(pytest.Item):
    """One rule, verified on instances of its own pattern."""

    def __init__(self, *, rule, ruleset, **kwargs):
        super().__init__(**kwargs)
        self.rule, self.ruleset = rule, ruleset

    def runtest(self) -> None:
        from ngrules.verification.verify import verify_rule

        examples = self.config.getoption("ngrules_examples")
        verdict = verify_rule(self.rule, examples, ruleset=self.ruleset)
        outcome(verdict)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, RuleVerificationFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        line = self.rule.span.line - 1 if self.rule.span else 0
        return self.path, line, f"rule {self.rule.name}"
