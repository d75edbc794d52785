"""pytest plugin: the rules of configured `.rules` files are test items, each verified.

Registered through the `pytest11` entry point, but opt-in: installing ngrules must not make
pytest collect every `*.rules` file of every project (udev, make and firewall rules share the
suffix). A `.rules` file is collected only when

- it lies under a path of the `ngrules_rules` ini option (paths relative to the ini file),
- or under a path of `rules = [...]` in the `[tool.ngrules]` table of the nearest
  pyproject.toml (relative to that file),
- or under the folder of a `conftest.py` that sets `ngrules_rules = True`,
- or it is named on the command line (`pytest rules/simplify.rules`);

and even then a file that does not start like a rules file (its first word is not a
declaration keyword) is skipped, never an error. ngrules' language is imported only when such
a file is collected.
"""

from __future__ import annotations

import fnmatch
import re
import warnings
from pathlib import Path

import pytest

from ngrules.verification.profiles import register_profiles

register_profiles()  # so `pytest rules/ --hypothesis-profile=ci` works outside tests/

#: What the first word of a rules file can be (comments and blank lines aside).
_FIRST_WORD = re.compile(r"(?:\s*(?:#[^\n]*)?\n)*\s*(import|pass|pipeline|rule|op)\b")
_CONFIGURED = pytest.StashKey[tuple]()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("ngrules")
    group.addoption(
        "--ngrules-examples",
        type=int,
        default=None,
        help="instances each rule must fire on (default: the hypothesis profile's max_examples)",
    )
    parser.addini(
        "ngrules_rules",
        type="paths",
        default=[],
        help="files or folders (globs allowed) whose .rules files pytest verifies, rule by rule",
    )


def _configured(config) -> tuple[Path, ...]:
    """The paths under which `.rules` files are collected, from the ini file and pyproject."""
    found = config.stash.get(_CONFIGURED, None)
    if found is None:
        found = tuple(Path(p).resolve() for p in config.getini("ngrules_rules"))
        found += _pyproject_rules(config.rootpath)
        config.stash[_CONFIGURED] = found
    return found


def _pyproject_rules(root: Path) -> tuple[Path, ...]:
    from ngrules.config import load_config
    from ngrules.errors import NgrulesError

    try:
        project = load_config(root)
    except NgrulesError as e:  # a broken pyproject is not this plugin's business to fail on
        warnings.warn(f"ngrules: {e}; no .rules files collected from it", stacklevel=1)
        return ()
    if project.root is None:
        return ()
    return tuple((project.root / p).resolve() for p in project.rules)


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents or fnmatch.fnmatch(str(path), str(root))


def _marked_by_conftest(config, path: Path) -> bool:
    for plugin in config.pluginmanager.get_plugins():
        file = getattr(plugin, "__file__", None)
        if not file or Path(file).name != "conftest.py":
            continue
        if getattr(plugin, "ngrules_rules", False) and _under(path, Path(file).resolve().parent):
            return True
    return False


def _named_on_command_line(config, path: Path) -> bool:
    for arg in config.args:
        named = Path(str(arg).split("::")[0])
        named = named if named.is_absolute() else Path(config.invocation_params.dir) / named
        if named.resolve() == path:
            return True
    return False


def wanted(config, path: Path) -> bool:
    """Is `path` (a `.rules` file) one pytest should verify in this run?"""
    path = path.resolve()
    return (
        any(_under(path, root) for root in _configured(config))
        or _marked_by_conftest(config, path)
        or _named_on_command_line(config, path)
    )


def looks_like_rules(path: Path) -> bool:
    """Does the file start like a rules file (or hold only comments)? Cheap, never raises."""
    try:
        head = path.read_bytes()[:4096].decode("utf-8", errors="replace")
    except OSError:
        return False
    body = "\n".join(line for line in head.splitlines() if not line.lstrip().startswith("#"))
    return not body.strip() or _FIRST_WORD.match(head) is not None


def pytest_collect_file(file_path: Path, parent):
    if file_path.suffix != ".rules" or not wanted(parent.config, file_path):
        return None
    if not looks_like_rules(file_path):
        return None
    return RulesFile.from_parent(parent, path=file_path)


def _load_project_ops(config) -> None:
    """Once per session: `[tool.ngrules] ops` of the project and `ngrules.ops` entry points."""
    if not getattr(config, "_ngrules_ops_loaded", False):
        from ngrules.config import load_ops

        config._ngrules_ops_loaded = True
        load_ops(start=config.rootpath)


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
            _load_project_ops(self.config)
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
