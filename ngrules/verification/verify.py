"""Numerical verification of rules: each rule checked on random instances of its own pattern.

For every rule, hypothesis builds graphs that match the rule's pattern (`instances`), the rule
alone rewrites them, and the numpy executor runs both graphs in float64 on the same inputs; their
values (under strict or refinement semantics, see `compare`) and their derivatives with respect
to every input must agree. A difference is a counterexample, shrunk by hypothesis to a small graph
and printed with its axes, inputs and both results. Instances the rule does not fire on are not
evidence and are not counted. This finds wrong rules; `ngrules.verification.prove` proves them.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ngrules.interrupts import raise_if_interrupted
from ngrules.lang.rules import Rule, RuleSet
from ngrules.verification.cache import with_cache
from ngrules.verification.compare import (
    ATOL,
    FLOATS,
    RTOL,
    SEMANTICS,
    Comparison,
    compare,
    compare_derivatives,
)
from ngrules.verification.dtypes import narrow_dtype_check
from ngrules.verification.instances import Instance, Rejected, attempts, earlier_rules
from ngrules.verification.layouts import ill_formed_layout, layout_shape
from ngrules.verification.special import special_counterexample, widest
from ngrules.verification.verdicts import (
    Counterexample,
    Verdict,
    VerificationReport,
    ill_formed,
    with_proof,
)
from ngrules.verification.workers import judged, while_interrupted

__all__ = [
    "ATOL",
    "RTOL",
    "Comparison",
    "Counterexample",
    "Falsified",
    "Interrupted",
    "Verdict",
    "VerificationReport",
    "check_instance",
    "compare",
    "verify",
    "verify_rule",
]

#: A rule's run ends by counts (hypothesis's: the examples asked for fired, or too many
#: attempts rejected), so that a verdict never depends on the machine's load. These seconds
#: per rule are only a safety net, far above what any rule of the library or the corpora
#: takes (at most 4.3 s on a quiet machine, 2026-12-04).
BUDGET = 300.0
#: Instances kept per rule to run on special values once the random ones pass.
KEPT = 8
#: Attempts spent shrinking a counterexample (counted, as the run itself); then the smallest
#: found so far is reported. SHRINK_BUDGET seconds are a safety net.
SHRINK_CALLS, SHRINK_BUDGET = 150, 60.0
_UNDEFINED = "the left side is not finite (undefined under refinement, or it overflowed)"


class Falsified(Exception):
    """Raised inside the hypothesis test so that the failing instance is shrunk."""

    def __init__(self, counterexample: Counterexample, status: str = "wrong"):
        super().__init__(counterexample.problem)
        self.counterexample, self.status = counterexample, status


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during `verify`: `report` holds the verdicts computed so far."""

    def __init__(self, report: VerificationReport):
        super().__init__("verification interrupted")
        self.report = report


def check_instance(
    inst: Instance,
    rtol: float = RTOL,
    atol: float = ATOL,
    semantics: str = "strict",
    derivatives: bool = True,
    floats: str = "ieee",
) -> bool:
    """Raise Falsified if the rewrite of this instance is wrong or ill-formed; False if its
    values cannot be judged (undefined or overflowing), True if the rewrite preserved them.
    A rewrite that does not terminate is judged by its first step (`inst.step`). `floats`:
    IEEE or real-number judgement of values at finite inputs (`compare`)."""
    cx = Counterexample(inst.rule, inst.outputs, inst.feeds, "", after=inst.after)
    bad = ill_formed(inst)
    if bad is not None:
        cx.problem = bad
        raise Falsified(cx, "ill-formed")
    after = inst.after if inst.stop == "fixpoint" else inst.step
    cx.after = after
    result = compare(inst.outputs, after, inst.feeds, rtol, atol, semantics, floats=floats)
    cx.expected, cx.got = result.expected, result.got
    if result.problem is None and result.usable and derivatives:
        result.problem = compare_derivatives(inst.outputs, after, inst.feeds,
                                             assumed=inst.assumed)
    if result.problem is not None:
        cx.problem = result.problem
        if inst.stop != "fixpoint":
            cx.note = f"(one rewrite step; the rule alone does not terminate: {inst.message})"
        raise Falsified(cx, "ill-formed" if "fails to run" in result.problem else "wrong")
    return result.usable


# -- running hypothesis ---------------------------------------------------------------------------
@dataclass
class _Tally:
    fired: int = 0
    tried: int = 0
    failing: bool = False
    failed_at: float = 0.0
    shrinks: int = 0  # attempts since the first failure
    smallest: Falsified | None = None  # the last (smallest) failure while shrinking
    loops: str = ""
    reasons: Counter = field(default_factory=Counter)
    kept: list = field(default_factory=list)  # instances for the special values
    kept_shapes: list = field(default_factory=list)  # their `layout_shape`s
    varied: list = field(default_factory=list)  # and two with the most axes longer than 1

    def keep(self, instance) -> None:
        """Keep KEPT instances for the later checks (other layouts, special values, narrow
        dtypes), of as many shapes as drawn: a new shape takes a repeated one's place (the
        layout check needs a shape whose other layouts break the rule: `a - Broadcast?(c) =>
        a + -c` an unbroadcast `c` of `a`'s rank; the first 8 drawn often had 2 shapes)."""
        self.varied = widest(self.varied, instance)
        shape, shapes = layout_shape(instance), self.kept_shapes
        if len(self.kept) < KEPT:
            self.kept.append(instance)
            shapes.append(shape)
        elif shape not in shapes:
            repeated = [i for i, s in enumerate(shapes) if shapes.count(s) > 1]
            if repeated:
                self.kept[repeated[-1]], shapes[repeated[-1]] = instance, shape

    def reject(self, reason: str) -> None:
        from hypothesis import reject

        self.reasons[_normalised(reason)] += 1
        reject()

    def why(self, out_of_time: bool, budget: float | None) -> str:
        parts = [f"{reason} in {n} of {self.tried} attempts" for reason, n in
                 self.reasons.most_common(3)]
        if out_of_time:
            parts.insert(0, f"the safety net of {budget:g} s stopped it after {self.tried} "
                         f"attempt{'s' * (self.tried != 1)}")
        if not parts:
            parts = ["no attempt could be made"]
        usable = f"{self.fired} of {self.tried} attempts were usable"
        return f"could not build instances: {usable}: " + "; ".join(parts)


def _normalised(reason: str) -> str:
    """The reason with axes and values elided (so that like reasons count together), quoted
    rule text (between backquotes) kept as written."""
    parts = reason.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"\[[^\]]*\]|\([^()]*\)", "(...)", parts[i])
    return "`".join(parts)


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
    """Ends a rule's run: shrunk enough, or the safety net (hypothesis lets it through)."""


@dataclass
class Options:
    """How instances are judged: tolerances, semantics, whether derivatives are compared,
    IEEE or real-number floats."""

    rtol: float = RTOL
    atol: float = ATOL
    semantics: str = "strict"
    derivatives: bool = True
    floats: str = "ieee"


def _property(rule: Rule, earlier: list, tally: _Tally, opts: Options, deadline):
    from hypothesis import given

    @given(attempts(rule, earlier))
    def prop(attempt: Instance | Rejected) -> None:
        raise_if_interrupted()  # a Ctrl-C that landed in hypothesis's gc callback
        now = time.perf_counter()
        if tally.failing:
            tally.shrinks += 1
            if tally.shrinks > SHRINK_CALLS or now > tally.failed_at + SHRINK_BUDGET:
                raise _OutOfTime  # shrunk long enough: report the smallest failure so far
        elif deadline is not None and now > deadline:
            raise _OutOfTime  # the safety net: no rule of the library comes near it
        tally.tried += 1
        if isinstance(attempt, Rejected):
            tally.reject(attempt.reason)
        if attempt.stop != "fixpoint" and not tally.loops:
            tally.loops = attempt.message
        try:
            usable = check_instance(attempt, opts.rtol, opts.atol, opts.semantics,
                                    opts.derivatives, opts.floats)
        except Falsified as f:
            if not tally.failing:  # shrink for SHRINK_CALLS attempts, whatever the budget
                tally.failing, tally.failed_at = True, time.perf_counter()
            if tally.smallest is None or f.status == tally.smallest.status:
                tally.smallest = f  # the verdict is the first failure's (a count decides it)
            raise
        if not usable:
            tally.reject(_UNDEFINED)
        tally.fired += 1
        tally.keep(attempt)

    return prop


def verify_rule(
    rule: Rule,
    examples: int | None = None,
    rtol: float = RTOL,
    atol: float = ATOL,
    ruleset: RuleSet | None = None,
    budget: float | None = BUDGET,
    semantics: str = "strict",
    derivatives: bool = True,
    seed: int | None = None,
    floats: str = "ieee",
) -> Verdict:
    """Verify one rule on `examples` instances it fires on (default: the hypothesis profile).
    With its RuleSet, nodes that an earlier rule of the same pass takes are not counted.
    The run ends by counts; `budget` seconds are a safety net (None: none). `seed` seeds every
    draw (instances, special values, narrow-dtype inputs); None: hypothesis's own (fixed under
    a derandomized profile such as `ci`). floats: "ieee" (the default) judges values as
    float64 computes them, "reals" as real numbers (`compare`)."""
    from hypothesis.errors import Unsatisfiable

    if semantics not in SEMANTICS:
        raise ValueError(f"semantics must be one of {SEMANTICS}, not {semantics!r}")
    if floats not in FLOATS:
        raise ValueError(f"floats must be one of {FLOATS}, not {floats!r}")
    if rule.floats == "reals":  # `assume reals`: the author's rewrite of real numbers
        floats = "reals"
    start, tally = time.perf_counter(), _Tally()
    earlier = earlier_rules(rule, ruleset)
    needed = max(1, (examples or _settings(None).max_examples) // 10)
    deadline = None if budget is None else start + budget
    opts = Options(rtol, atol, semantics, derivatives, floats)
    run = _settings(examples)(_property(rule, earlier, tally, opts, deadline))
    if seed is not None:
        from hypothesis import seed as seeded

        run = seeded(seed)(run)
    verdict = Verdict(rule, "verified", semantics=semantics, floats=floats)
    try:
        run()
    except Falsified as f:
        verdict.status, verdict.counterexample = f.status, f.counterexample
    except Unsatisfiable:
        pass
    except Exception as e:
        if while_interrupted(e):  # hypothesis's own bookkeeping failed on the Ctrl-C
            raise KeyboardInterrupt from None
        raise
    except _OutOfTime:
        verdict.out_of_time = not tally.failing  # the safety net, not the end of shrinking
        if tally.smallest is not None:
            f = tally.smallest
            verdict.status, verdict.counterexample = f.status, f.counterexample
    if verdict.status in ("verified", "loops") and tally.kept:
        check = ill_formed_layout(tally.kept)  # the same shapes in other layouts
        verdict.layouts = str(check)
        if check.counterexample is not None:
            verdict.status, verdict.counterexample = "ill-formed", check.counterexample
        else:
            cx = special_counterexample(tally.kept, semantics, rtol, atol, seed=seed or 0,
                                        floats=floats, varied=tally.varied)
            if cx is None:
                narrow = narrow_dtype_check(tally.kept, seed or 0)
                cx, verdict.dtypes = narrow.counterexample, str(narrow)
            if cx is not None:
                verdict.status, verdict.counterexample = "wrong", cx
    if verdict.status == "verified" and tally.loops:
        verdict.status = "loops"
        verdict.reason = f"{tally.loops} (each step preserves values on {tally.fired} examples)"
    elif verdict.status == "verified" and tally.fired < needed:
        verdict.status, verdict.reason = "unverified", tally.why(verdict.out_of_time, budget)
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
    semantics: str = "strict",
    prove: bool = False,
    bound: int = 3,
    disable: Iterable[str] = (),
    on_rule: Callable[[int, int, Rule], None] | None = None,
    only: Iterable[str] | None = None,
    seed: int | None = None,
    jobs: int = 1,
    opset: int | None = None,
    prove_budget: tuple[float, int] | None = None,
    floats: str = "ieee",
    cache: bool = True,
    progress: bool = False,
    prove_rank: int = 3,
) -> VerificationReport:
    """Check every rule numerically on instances of its own pattern; a report of verdicts.

    rules: a RuleSet, one Rule, rules, or a path to load. examples: instances the rule must
    fire on per rule (default: max_examples of the current hypothesis profile); a rule's run
    ends by counts, `budget` seconds per rule are only a safety net (None: none). semantics:
    "strict" (NaN stays NaN, an infinity the same infinity) or "refine" (an undefined result
    may become defined). prove: first try an SMT proof (needs z3): for every shape, or else
    for every shape of ranks <= `prove_rank` and lengths <= `bound`, enumerated
    (`proved-bounded`: the rule is still tested); a rule proved for every shape is not
    tested. disable: rule names left out, of a RuleSet's passes too (`RuleSet.without`, as
    `apply --disable`). Within a RuleSet, a rule is checked on the nodes it would get in its
    pass: those no earlier rule of the pass matches (first match wins); a lone rule or a list
    is checked on its own.
    on_rule(i, n, rule) is called before the i-th of n rules. only: the names of the rules to
    verify (the others still take their nodes in their passes). jobs: rules judged at once in
    forked workers (`workers`). Ctrl-C raises `Interrupted`, its `report` the verdicts so far.
    seed: seeds every draw; None: fixed under a derandomized hypothesis profile (`ci`), else
    a random one, kept in `report.seed` and printed (`verify --seed N` reproduces the run).
    opset: of declared ops' `onnx` clauses run under onnxruntime (default: the exporter's).
    prove_budget: (CPU seconds, z3 megabytes) of each proof (default: `prove.budget`). floats:
    "ieee" (at finite inputs, overflow, cancellation or NaN on one side only is wrong) or
    "reals" (`compare`). cache: the verdict cache (`verification.cache`; never with a random
    seed). progress: one line per rule on stderr as its verdict is known.
    """
    start = time.perf_counter()
    if prove:
        from ngrules.verification.prove import require_z3

        require_z3()
    chosen, ruleset = _rules_of(rules)
    off = set(disable)
    if off and ruleset is not None:
        ruleset = ruleset.without(off)  # out of their passes too, as `apply --disable` does
    chosen = [r for r in chosen if r.name not in off]
    if only is not None:
        wanted = set(only)
        chosen = [r for r in chosen if r.name in wanted]
    repeatable = seed is not None or _settings(None).derandomize
    if not repeatable:
        seed = random.SystemRandom().getrandbits(32)
    report = VerificationReport(seed=seed)
    args = (examples, rtol, atol, ruleset, budget, semantics, prove and (prove_budget or True),
            (bound, prove_rank), seed, floats)
    keyed = dict(zip(("examples", "rtol", "atol", "budget", "semantics", "prove", "bound",
                      "seed", "floats"), args[:3] + args[4:]))
    keyed["examples"] = examples or _settings(None).max_examples
    try:
        for verdict in with_cache(chosen, ruleset, keyed if cache and repeatable else None,
                                  lambda missed: judged(missed, _isolated, args, jobs, on_rule),
                                  progress):
            report.verdicts.append(verdict)
            raise_if_interrupted()
    except KeyboardInterrupt:
        report.interrupted = True
        report.seconds = time.perf_counter() - start
        raise Interrupted(report) from None
    if ruleset is not None:
        from ngrules.verification.kernels import verify_kernels
        from ngrules.verification.onnxops import verify_onnx_ops

        report.kernels = verify_kernels(ruleset.ops) + verify_onnx_ops(ruleset.ops, opset)
    report.seconds = time.perf_counter() - start
    return report


def _isolated(rule, *args) -> Verdict:
    """The rule's verdict; an error of the verifier itself (not of the rule's rewrite, which
    is a verdict) is this rule's `unverified` with the error, never the end of the run."""
    start = time.perf_counter()
    try:
        return _one(rule, *args)
    except (KeyboardInterrupt, Interrupted):
        raise
    except Exception as e:  # one rule's failure never stops the others'
        if while_interrupted(e):
            raise KeyboardInterrupt from None
        verdict = Verdict(rule, "unverified", seconds=time.perf_counter() - start)
        verdict.reason = f"verification itself failed: {type(e).__name__}: {e}"
        return verdict


def _one(rule, examples, rtol, atol, ruleset, budget, semantics, prove, bound, seed,
         floats="ieee") -> Verdict:
    def tested() -> Verdict:
        return verify_rule(rule, examples, rtol, atol, ruleset, budget, semantics, seed=seed,
                           floats=floats)

    if prove:
        from ngrules.verification.prove import prove_rule

        limits = prove if isinstance(prove, tuple) else None  # (seconds, megabytes)
        length, rank = bound  # of the enumerated shapes, where no proof for every shape exists
        proof = prove_rule(rule, bound=length, semantics=semantics, budget=limits, rank=rank)
        return with_proof(proof, tested, floats)
    return tested()

