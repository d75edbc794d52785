"""Numerical verification of rules: each rule checked on random instances of its own pattern.

For every rule, hypothesis builds graphs that match the rule's pattern (`ngrules.instances`),
the rule alone rewrites them, and the numpy executor runs both graphs in float64 on the same
inputs. A difference beyond the tolerance is a counterexample, shrunk by hypothesis to a small
graph and printed with its axes, inputs and both results. Instances the rule does not fire on
are not evidence and are not counted. This finds wrong rules; it does not prove right ones.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ngrules.ir.graph import Node, format_graph, toposort
from ngrules.lang.rules import Rule, RuleSet
from ngrules.verification.instances import Instance, Rejected, as_float64, attempts, earlier_rules

#: Default tolerance: float64 on both sides, so only reassociation error is allowed.
RTOL, ATOL = 1e-6, 1e-9
#: Seconds per rule after which no new instances are built.
BUDGET = 5.0
_UNUSABLE = "the values overflow or leave an op's domain (not finite before the rewrite)"


# -- comparing two graphs -------------------------------------------------------------------------
@dataclass
class Comparison:
    """Both graphs' results in float64; `problem` says how they differ (None: they agree)."""

    expected: list[np.ndarray]
    got: list[np.ndarray] | None
    problem: str | None = None
    usable: bool = True


def _difference(expected: np.ndarray, got: np.ndarray, node: Node, rtol, atol) -> str | None:
    if expected.shape != got.shape:
        return f"shapes differ: {expected.shape} before, {got.shape} after"
    scale = atol * max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    close = np.isclose(got, expected, rtol=rtol, atol=scale)
    if close.all():
        return None
    diff = np.where(close, 0.0, np.abs(got - expected))
    diff = np.where(np.isnan(diff), np.inf, diff)
    where = np.unravel_index(int(np.argmax(diff)), expected.shape)
    at = ", ".join(f"{a.name}={i}" for a, i in zip(node.axes, where)) or "the scalar"
    return (
        f"max |after - before| = {diff[where]:.6g} at {at} "
        f"(before {expected[where]:.6g}, after {got[where]:.6g})"
    )


def compare(
    before: Sequence[Node],
    after: Sequence[Node],
    feeds: dict[Node, np.ndarray],
    rtol: float = RTOL,
    atol: float = ATOL,
) -> Comparison:
    """Run both graphs in float64 on the same feeds and compare output by output."""
    from ngrules.ir.executor import execute

    graphs, memo = as_float64(list(before) + list(after))
    feeds64 = {memo[k]: np.asarray(v, np.float64) for k, v in feeds.items() if k in memo}
    with np.errstate(all="ignore"):
        expected = execute(graphs[: len(before)], feeds64, ignore_unused=True)
        if not all(np.isfinite(e).all() for e in expected):
            return Comparison(expected, None, usable=False)
        try:
            got = execute(graphs[len(before) :], feeds64, ignore_unused=True)
        except Exception as e:  # the rewritten graph cannot run: that is the finding
            return Comparison(expected, None, f"the rewritten graph fails to run: {e}")
    for i, (e, g, node) in enumerate(zip(expected, got, before)):
        problem = _difference(e, g, node, rtol, atol)
        if problem is not None:
            where = f" (output {i})" if len(before) > 1 else ""
            return Comparison(expected, got, f"results differ{where}: {problem}")
    return Comparison(expected, got)


# -- counterexamples ----------------------------------------------------------------------------
def _indent(text: str, pad: str = "    ") -> str:
    return "\n".join(pad + line for line in text.splitlines())


def _array(value: np.ndarray) -> str:
    return np.array2string(np.asarray(value), precision=4, separator=", ", threshold=64)


def _axes_line(nodes: Sequence[Node]) -> str:
    seen: dict[str, int] = {}
    for node in toposort(nodes):
        for ax in node.axes.leaves() if node.outputs is None else ():
            seen.setdefault(ax.name, ax.length)
    return ", ".join(f"{n}={k}" for n, k in seen.items()) or "none (every tensor is a scalar)"


@dataclass
class Counterexample:
    """A (shrunk) instance on which a rule is wrong, with everything needed to replay it."""

    rule: Rule | None
    before: list[Node]
    feeds: dict[Node, np.ndarray]
    problem: str
    after: list[Node] | None = None
    expected: list[np.ndarray] | None = None
    got: list[np.ndarray] | None = None

    def _inputs(self) -> list[str]:
        return [
            f"{node.name} {node.axes!r} = {_array(value)}"
            for node, value in sorted(self.feeds.items(), key=lambda kv: kv[0].name)
        ]

    def __str__(self) -> str:
        if self.rule is None:
            lines = ["the rewrite changes results:"]
        else:
            lines = [f"counterexample for rule {self.rule.name} ({self.rule.location}):"]
            lines += [_indent(self.rule.source)] if self.rule.source else []
        lines += ["  instance:", _indent(format_graph(self.before))]
        if self.after is not None:
            lines += ["  rewritten to:", _indent(format_graph(self.after))]
        lines += [f"  axes: {_axes_line(self.before)}", "  inputs:"]
        lines += [_indent(s) for s in self._inputs()] or ["    none"]
        if self.expected is not None:
            lines += [f"  before: {_array(v)}" for v in self.expected]
        if self.got is not None:
            lines += [f"  after:  {_array(v)}" for v in self.got]
        lines.append(f"  {self.problem}")
        return "\n".join(lines)


class Falsified(Exception):
    """Raised inside the hypothesis test so that the failing instance is shrunk."""

    def __init__(self, counterexample: Counterexample):
        super().__init__(counterexample.problem)
        self.counterexample = counterexample


def check_instance(inst: Instance, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """Raise Falsified if the rewrite of this instance is wrong; False if the values are
    unusable (not finite before the rewrite), True if the rewrite preserved them."""
    cx = Counterexample(inst.rule, inst.outputs, inst.feeds, "", after=inst.after)
    if inst.error is not None:
        cx.problem = f"the rewrite raised an error: {inst.error}"
        raise Falsified(cx)
    result = compare(inst.outputs, inst.after, inst.feeds, rtol, atol)
    if not result.usable:
        return False
    cx.expected, cx.got = result.expected, result.got
    if result.problem is None and inst.stop != "fixpoint":
        result.problem = f"the rule alone does not terminate: {inst.message}"
    if result.problem is not None:
        cx.problem = result.problem
        raise Falsified(cx)
    return True


# -- verdicts and reports ------------------------------------------------------------------------
@dataclass
class Verdict:
    """The outcome for one rule: verified, counterexample, or could not build instances."""

    rule: Rule
    status: str  # "verified", "counterexample" or "unbuildable"
    examples: int = 0
    attempts: int = 0
    reason: str = ""
    counterexample: Counterexample | None = None
    seconds: float = 0.0
    out_of_time: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "verified"

    @property
    def headline(self) -> str:
        where = f"{self.rule.name} ({self.rule.location})"
        if self.status == "verified":
            budget = " (time budget reached)" if self.out_of_time else ""
            return f"verified      {where}: {self.examples} examples fired{budget}"
        if self.status == "counterexample":
            return f"FAILED        {where}: {self.counterexample.problem}"
        return f"UNVERIFIED    {where}: could not build instances: {self.reason}"

    def __str__(self) -> str:
        if self.counterexample is None:
            return self.headline
        return f"{self.headline}\n{_indent(str(self.counterexample), '  ')}"


@dataclass
class VerificationReport:
    """Per-rule verdicts; `ok` when every rule verified."""

    verdicts: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts)

    @property
    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]

    def __getitem__(self, name: str) -> Verdict:
        for v in self.verdicts:
            if v.rule.name == name:
                return v
        raise KeyError(name)

    def __iter__(self):
        return iter(self.verdicts)

    def __len__(self) -> int:
        return len(self.verdicts)

    def __str__(self) -> str:
        counts = Counter(v.status for v in self.verdicts)
        summary = (
            f"{counts['verified']} verified, {counts['counterexample']} with counterexamples, "
            f"{counts['unbuildable']} unverified of {len(self.verdicts)} rules "
            f"in {self.seconds:.1f} s"
        )
        return "\n".join([*(str(v) for v in self.verdicts), summary])


# -- running hypothesis ---------------------------------------------------------------------------
@dataclass
class _Tally:
    fired: int = 0
    tried: int = 0
    failing: bool = False
    reasons: Counter = field(default_factory=Counter)

    def reject(self, reason: str) -> None:
        from hypothesis import reject

        self.reasons[re.sub(r"\[[^\]]*\]|\([^()]*\)", "(...)", reason)] += 1
        reject()

    def why(self) -> str:
        top = self.reasons.most_common(3)
        parts = [f"{reason} ({n} times)" for reason, n in top]
        return f"{self.fired} of {self.tried} attempts were usable; " + "; ".join(parts)


def _settings(examples: int | None):
    from hypothesis import HealthCheck, Phase, Verbosity, settings

    base = settings.default
    return settings(
        base,
        max_examples=examples or base.max_examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
    )


class _OutOfTime(BaseException):
    """Ends a rule's run when its time budget is spent (hypothesis lets it through)."""


def _property(rule: Rule, earlier: list, tally: _Tally, rtol: float, atol: float, deadline):
    from hypothesis import given

    @given(attempts(rule, earlier))
    def prop(attempt: Instance | Rejected) -> None:
        if deadline is not None and time.perf_counter() > deadline and not tally.failing:
            raise _OutOfTime
        tally.tried += 1
        if isinstance(attempt, Rejected):
            tally.reject(attempt.reason)
        try:
            usable = check_instance(attempt, rtol, atol)
        except Falsified:
            tally.failing = True  # finish shrinking whatever the time
            raise
        if not usable:
            tally.reject(_UNUSABLE)
        tally.fired += 1

    return prop


def verify_rule(
    rule: Rule,
    examples: int | None = None,
    rtol: float = RTOL,
    atol: float = ATOL,
    ruleset: RuleSet | None = None,
    budget: float | None = BUDGET,
) -> Verdict:
    """Verify one rule on `examples` instances it fires on (default: the hypothesis profile).
    With its RuleSet, nodes that an earlier rule of the same pass takes are not counted.
    After `budget` seconds no new instances are built (None: no limit)."""
    from hypothesis.errors import Unsatisfiable

    start, tally = time.perf_counter(), _Tally()
    earlier = earlier_rules(rule, ruleset)
    deadline = None if budget is None else start + budget
    run = _settings(examples)(_property(rule, earlier, tally, rtol, atol, deadline))
    verdict = Verdict(rule, "verified")
    try:
        run()
    except Falsified as f:
        verdict.status, verdict.counterexample = "counterexample", f.counterexample
    except Unsatisfiable:
        pass
    except _OutOfTime:
        verdict.out_of_time = True
    needed = max(1, (examples or _settings(None).max_examples) // 10)
    if verdict.status == "verified" and tally.fired < needed:
        verdict.status, verdict.reason = "unbuildable", tally.why()
    verdict.examples, verdict.attempts = tally.fired, tally.tried
    verdict.seconds = time.perf_counter() - start
    return verdict


def _rules_of(rules) -> tuple[list[Rule], RuleSet | None]:
    if isinstance(rules, Rule):
        return [rules], None
    if isinstance(rules, (str, os.PathLike)):
        from ngrules.lang.loader import load_rules

        rules = load_rules(rules)
    if isinstance(rules, RuleSet):
        return list(rules.rules), rules
    return list(rules), None


def verify(
    rules: RuleSet | Rule | Iterable[Rule] | str | os.PathLike,
    examples: int | None = None,
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
    budget: float | None = BUDGET,
    on_rule: Callable[[int, int, Rule], None] | None = None,
) -> VerificationReport:
    """Check every rule numerically on instances of its own pattern; a report of verdicts.

    rules: a RuleSet, one Rule, rules, or a path to load. examples: instances the rule must
    fire on per rule (default: max_examples of the current hypothesis profile); budget:
    seconds per rule after which no new instances are built (None: no limit). Within a
    RuleSet, a rule is checked on the nodes it would get in its pass: those no earlier rule
    of the pass matches (first match wins); a lone rule or a list is checked on its own.
    on_rule(i, n, rule) is called before the i-th of n rules (a progress display).
    """
    start = time.perf_counter()
    chosen, ruleset = _rules_of(rules)
    verdicts = []
    for i, rule in enumerate(chosen, start=1):
        if on_rule is not None:
            on_rule(i, len(chosen), rule)
        verdicts.append(verify_rule(rule, examples, rtol, atol, ruleset, budget))
    report = VerificationReport(verdicts)
    report.seconds = time.perf_counter() - start
    return report
