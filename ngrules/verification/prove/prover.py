"""Proof of a rule with z3: on each instance of its pattern, for all real input values.

Instances come from the same builder as testing (lengths up to `bound`), each rewritten by the
rule; both graphs are unrolled into scalar z3 terms (`tensors`) and z3 is asked for inputs on
which they differ:

- strict semantics: the two sides are defined at the same inputs, and equal where defined;
- refinement: where the left side is defined, the right side is defined and equal.

`unsat` on every instance is a proof for all input values on those instances only, a sample of
shapes: a proof for every shape comes from a rule made of elementwise ops, with no typed
constants, proved at rank 0 (it acts pointwise), or from the structures of axis groups
(`groups`). A `sat` model is a counterexample, replayed with the numpy executor before it is
reported; `unknown` (nonlinear arithmetic, quantified axioms) leaves the rule unproved.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass

import numpy as np
import z3

from ngrules.ir.graph import Node, format_graph, toposort
from ngrules.lang.rules import Rule
from ngrules.verification.compare import compare
from ngrules.verification.dtypes import narrow_dtype_check
from ngrules.verification.instances import Instance
from ngrules.verification.instances.assumed import broken
from ngrules.verification.layouts import MAX_LAYOUTS, layout_count, layouts
from ngrules.verification.prove.budget import Budget, BudgetSpent, check_size
from ngrules.verification.prove.cpustop import CpuStop
from ngrules.verification.prove.exact import exact
from ngrules.verification.prove.floats import encodable as fp_encodable
from ngrules.verification.prove.floats import prove_in_floats
from ngrules.verification.prove.ground import ground_axioms
from ngrules.verification.prove.groups import every_shape
from ngrules.verification.prove.pointwise import pointwise, pointwise_after
from ngrules.verification.prove.scalars import axioms_for
from ngrules.verification.prove.tensors import NoEncoding, evaluate
from ngrules.verification.prove.within import prove_within
from ngrules.verification.special import special_counterexample
from ngrules.verification.verdicts import Counterexample, Verdict, ill_formed

#: z3's resource limit (deterministic steps: a verdict must not depend on the machine's load)
#: for one result element, with the quantified axioms and with their instances on the
#: element's terms (tried first); the library's proofs take at most 40 thousand.
RLIMIT, GROUND_RLIMIT = 4_000_000, 2_000_000
#: A stop in CPU seconds besides (`cpustop`: not wall-clock time, which a loaded machine
#: stretches): z3's nonlinear real arithmetic counts few steps (a query of the library ran 10
#: minutes within a million). The library's longest decided element takes 0.72 s of CPU (4.5 s
#: of wall time at load 8-11, 2026-12-04), so only claims z3 cannot decide in any case meet it.
SAFETY_CPU = 3.0
#: Instances kept from the draws (distinct shapes), and chosen among them to prove (each then
#: in every layout): one of each kind of shape first (`_varied`).
KEPT, LAYOUTS = 40, 12


@dataclass
class Outcome:
    """One instance's result: 'proved', 'wrong' (with a replayed counterexample), 'unknown'."""

    status: str
    detail: str = ""
    counterexample: Counterexample | None = None


def _claims(before: list[np.ndarray], after: list[np.ndarray], semantics: str) -> list:
    """What must hold for all inputs, one claim per result element: definedness and equality.
    All hold for all inputs iff each does, and z3 decides many small claims far faster than
    their conjunction."""
    parts = []
    for b_arr, a_arr in zip(before, after):
        for idx in np.ndindex(b_arr.shape):
            b, a = b_arr[idx], a_arr[idx]
            same = z3.Implies(b.ok, z3.And(a.ok, b.v == a.v))
            parts.append((same if semantics == "refine" else z3.And(same, a.ok == b.ok), b, a))
    return parts


#: Relative differences asked for when a model's difference falls under the tolerance once
#: rounded to floats (z3 found x = 2000001 for `Minimum(x, 2e6) => x`: ask for a bigger one).
WIDER = (1e-3, 1.0, 1e3)


def _wider(b, a, k: float):
    """Both sides defined and apart by more than k times (1 + |before|)."""
    gap = z3.If(b.v >= a.v, b.v - a.v, a.v - b.v)
    size = z3.If(b.v >= 0, b.v, -b.v)
    return z3.And(b.ok, a.ok, gap > k * (1 + size))


def _feeds(model, inputs: dict[Node, np.ndarray]) -> dict[Node, np.ndarray]:
    feeds = {}
    for node, arr in inputs.items():
        value = np.zeros(arr.shape)
        for idx in np.ndindex(arr.shape):
            got = model.eval(arr[idx].v, model_completion=True)
            value[idx] = float(got.as_fraction()) if z3.is_rational_value(got) else 0.0
        feeds[node] = value.astype(node.dtype)
    return feeds


class Proved:
    """The claims proved so far (for one rule): a layout's element whose claim is the same
    term as one already proved (z3 shares equal terms, and an input's element is the same
    variable in every layout) is not decided again. Keeps the terms alive, so that their ids
    are never reused for other terms."""

    def __init__(self):
        self._terms: dict[tuple[int, int], tuple] = {}

    def __contains__(self, pair) -> bool:
        return (pair[0].get_id(), pair[1].get_id()) in self._terms

    def add(self, pair) -> None:
        self._terms[(pair[0].get_id(), pair[1].get_id())] = pair


def prove_instance(inst: Instance, semantics: str = "strict",
                   proved: Proved | None = None, budget: Budget | None = None) -> Outcome:
    """Prove before == after on this instance for all inputs, or find where they differ
    (claims in `proved` are not decided again; those proved here are added). BudgetSpent
    when the proof's budget runs out (a default one, if none is given)."""
    budget = budget or Budget().start()
    after = inst.after if inst.stop == "fixpoint" else inst.step
    inputs: dict[Node, np.ndarray] = {}
    proved = Proved() if proved is None else proved
    try:
        left = evaluate(inst.outputs, inputs)
        right = evaluate(after, inputs)
        assumed = _preconditions(inst, inputs)
    except NoEncoding as e:
        return Outcome("unknown", str(e))
    except (TypeError, ValueError) as e:  # a kernel that cannot run on terms
        return Outcome("unknown", f"could not unroll the instance into terms: {e}")
    for claim, b, a in _claims(left, right, semantics):
        if (claim, assumed) in proved:
            continue
        check_size(claim, assumed)  # before z3 multiplies out a degree of 2**40
        task = _Task(claim, assumed, inst, after, inputs, semantics, (b, a), budget)
        outcome = _ground(task)
        if outcome is None:
            outcome = _decide(task, axioms_for(z3.And(claim, assumed)))
        if outcome.status != "proved":
            return outcome
        proved.add((claim, assumed))
    return Outcome("proved")


@dataclass
class _Task:
    """One element's claim to decide, under the rule's assumptions, and what replays a model."""

    claim: object
    assumed: object
    inst: Instance
    after: list
    inputs: dict
    semantics: str
    sides: tuple = ()  # the element before and after (Sym), to ask for a wider difference
    budget: Budget | None = None  # the whole proof's (CPU seconds, z3 memory)


def _ground(task: _Task) -> Outcome | None:
    """The claim decided with the axioms instantiated on its terms: a proof, a counterexample
    that reproduces, or None (undecided, or a model that breaks some axiom)."""
    facts = ground_axioms(z3.And(task.claim, task.assumed))
    outcome = _decide(task, facts, GROUND_RLIMIT)
    return None if outcome.status == "unknown" else outcome


def _decide(task: _Task, facts, steps: int = RLIMIT) -> Outcome:
    budget = task.budget or Budget().start()
    solver = z3.Solver()
    solver.set("rlimit", steps)
    stop_after = min(SAFETY_CPU, budget.left())
    try:
        solver.add(*facts)
        solver.add(task.assumed, z3.Not(task.claim))
        with CpuStop(stop_after) as stop:
            answer = solver.check()
    except z3.Z3Exception as e:
        if "memory" in str(e):
            raise budget.memory_spent() from None
        raise
    if answer == z3.unknown and "memory" in solver.reason_unknown():
        raise budget.memory_spent()
    if stop.hit and stop_after < SAFETY_CPU:
        budget.left()  # the proof's budget, not the query's stop, ran out
    if answer == z3.unsat:
        return Outcome("proved")
    if answer == z3.sat:
        feeds = _feeds(solver.model(), task.inputs)
        outcome = _replay(task.inst, task.after, feeds, task.semantics)
        return outcome if outcome.status == "wrong" else _widened(solver, task, outcome)
    reason = solver.reason_unknown()
    if stop.hit:
        reason = f"its stop of {SAFETY_CPU:g} CPU seconds came first on one result element"
    elif reason == "max. resource limit exceeded":
        reason = f"its limit of {steps / 1e6:g} million steps ran out on one result element"
    return Outcome("unknown", f"z3 could not decide ({reason})")


def _widened(solver, task: _Task, first: Outcome) -> Outcome:
    """A counterexample under the tolerance is never dropped: ask z3 for one whose difference
    is wider, and replay it; `first` (not proved) if none reproduces."""
    for k in WIDER if task.sides else ():
        solver.push()
        solver.add(_wider(*task.sides, k))
        with CpuStop(SAFETY_CPU):
            answer = solver.check()
        if answer == z3.sat:
            outcome = _replay(task.inst, task.after, _feeds(solver.model(), task.inputs),
                              task.semantics)
            if outcome.status == "wrong":
                return outcome
        solver.pop()
    return first


def _preconditions(inst: Instance, inputs: dict[Node, np.ndarray]):
    """The rule's `assume` ranges on every element of the nodes they name (defined there)."""
    parts = []
    for a, node in inst.assumed:
        if node.outputs is not None:
            raise NoEncoding(f"the assumption `{a}` names a multi-output node")
        for sym in evaluate([node], inputs)[0].flat:
            if a.low > -np.inf:
                parts.append(sym.v > a.low if a.low_open else sym.v >= a.low)
            if a.high < np.inf:
                parts.append(sym.v < a.high if a.high_open else sym.v <= a.high)
            parts.append(z3.BoolVal(True) if sym.ok is True else sym.ok)
    unique = {p.get_id(): p for p in parts}  # in a fixed order: the same term in every layout
    return z3.And(*[unique[k] for k in sorted(unique)]) if parts else z3.BoolVal(True)


def _replay(inst: Instance, after, feeds, semantics: str) -> Outcome:
    """A z3 model as a counterexample, kept only if the executor reproduces it (within the
    rule's assumptions)."""
    feeds = {**inst.feeds, **feeds}
    missed = broken(inst.assumed, feeds)
    if missed is not None:
        return Outcome("unknown", f"z3's counterexample breaks the assumption `{missed}` once "
                       "rounded to floats")
    result = compare(inst.outputs, after, feeds, semantics=semantics, floats="reals")
    cx = Counterexample(inst.rule, inst.outputs, feeds, "", after, result.expected, result.got)
    if result.problem is None:
        return Outcome("unknown", "z3 found a counterexample that does not reproduce "
                       "numerically (float rounding, or an axiom too weak)")
    cx.problem = f"{result.problem} (found by z3, replayed with the executor)"
    return Outcome("wrong", cx.problem, cx)


#: Attempts to draw instances within the bound: a second run only when the first kept none
#: (instances of a big pattern, attention or a convolution, are rarely that small).
TRIES = (150, 350)


def _instances(rule: Rule, bound: int, count: int) -> list[Instance]:
    """Up to count instances of distinct layouts, every axis of length <= bound."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable

    from ngrules.verification.instances import attempts

    exact: dict[str, Instance] = {}
    other: dict[str, Instance] = {}

    def collect(attempt):
        if not isinstance(attempt, Instance) or len(exact) >= count:
            return  # every draw still runs: the first ones are the smallest, the least varied
        nodes = [n for n in toposort(attempt.outputs) if n.outputs is None]
        small = all(len(n.axes) <= bound for n in nodes)  # each in every layout: rank <= k
        if small and all(a.length <= bound for n in nodes for a in n.axes.leaves()):
            kept = exact if all(_dyadic(n) for n in nodes) else other
            kept.setdefault(format_graph(attempt.outputs), attempt)

    for tries in TRIES:  # more only for a rule whose instances within the bound are rare
        run = settings(max_examples=tries, database=None, derandomize=True, deadline=None,
                       phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
        with contextlib.suppress(Unsatisfiable):  # nothing built: the caller says so
            run(given(attempts(rule))(collect))()
        if exact or other:
            break
    return sorted(exact.values() or other.values(), key=lambda i: len(toposort(i.outputs)))


def _kind(inst: Instance) -> tuple:
    """What a layout cannot change: each node's op, rank and flattened axes, in the graph's
    order (a constant of rank 2 under a placeholder is not a broadcast scalar in any layout,
    nor a flattened input a plain one)."""
    return tuple((n.op, len(n.axes), sum(a.is_flattened for a in n.axes))
                 for n in toposort(inst.outputs) if n.outputs is None)


def _varied(kept: list[Instance], count: int) -> list[Instance]:
    """Up to count instances: the one with the fewest layouts of each kind first, then the
    others by their layouts (the first draws are the simplest and much alike)."""
    by_layouts = sorted(kept, key=layout_count)
    firsts: dict[tuple, Instance] = {}
    for inst in by_layouts:
        firsts.setdefault(_kind(inst), inst)
    chosen = list(firsts.values())[:count]
    chosen += [i for i in by_layouts if all(i is not c for c in chosen)][:count - len(chosen)]
    return sorted(chosen, key=lambda i: len(toposort(i.outputs)))


def _dyadic(node: Node) -> bool:
    """Not a constant, or one of small dyadic values (k/16, |k| <= 1024): sums, products and
    powers that a rule folds into a new constant are then exact in float64, as in the reals."""
    if node.op != "Constant":
        return True
    value = np.asarray(node.attrs["value"], np.float64) * 16
    return bool(np.all((value == np.round(value)) & (np.abs(value) <= 1024)))


def _all_layouts(drawn: list[Instance]) -> tuple[list[Instance], str]:
    """Every layout of the drawn instances (distinct), and which shapes they cover: all drawn
    shapes, or those whose layouts fit within MAX_LAYOUTS (fewest first)."""
    seen: dict[str, Instance] = {}
    done = 0
    for inst in sorted(drawn, key=layout_count):
        if layout_count(inst) + len(seen) > MAX_LAYOUTS:
            break
        done += 1
        for laid in layouts(inst):
            seen.setdefault(format_graph(laid.outputs) + repr(laid.after), laid)
    shapes = f"the {done} shapes drawn" if done == len(drawn) else \
        f"{done} of the {len(drawn)} shapes drawn (the others have too many layouts)"
    return sorted(seen.values(), key=lambda i: len(toposort(i.outputs))), shapes


def early_verdict(verdict: Verdict, laid: list[Instance], semantics: str) -> bool:
    """Ill-formed on some layout, or wrong on special values or in float32/float16 (the
    rule's own narrower dtypes): the verdict, and True."""
    for inst in laid:  # as the verifier: an ill-formed rewrite is no claim to prove
        bad = ill_formed(inst)
        if bad is not None:
            verdict.status = "ill-formed"
            verdict.counterexample = Counterexample(verdict.rule, inst.outputs, inst.feeds, bad,
                                                    after=inst.after)
            return True
    # IEEE's corners veto any proof; judged over the reals, as the proof is (issue 35: IEEE
    # floats are judged by testing after a proof over the reals, `verify.over_the_reals`)
    cx = special_counterexample(laid, semantics, floats="reals")
    if cx is None:  # so does a narrower float, where the reals say nothing of rounding
        cx = narrow_dtype_check(laid).counterexample
    if cx is not None:
        verdict.status, verdict.counterexample = "wrong", cx
        return True
    return False


def prove_rule(rule: Rule, bound: int = 3, semantics: str = "strict",
               budget: Budget | None = None, rank: int = 3) -> Verdict:
    """A `proved` verdict (for every shape), `proved-reals` when the proof holds for real
    numbers and the ops round in floats, `proved-bounded` for every shape of ranks <= rank and
    lengths <= bound (`within`), `wrong` with a replayed counterexample, `ill-formed`, or
    `unverified` saying why there is no proof (the budget's CPU seconds or z3 memory spent
    among the reasons).
    """
    start = time.perf_counter()
    verdict = Verdict(rule, "unverified", semantics=semantics, bound=bound)
    drawn = _varied(_instances(rule, bound, KEPT), LAYOUTS)
    laid, shapes = _all_layouts(drawn)
    if early_verdict(verdict, laid + drawn, semantics):
        verdict.seconds = time.perf_counter() - start
        return verdict
    if drawn and not laid:
        verdict.reason = (f"no proof: every shape drawn has more than {MAX_LAYOUTS} layouts "
                          "(a bounded proof tries every one)")
    else:
        try:
            _prove_values(verdict, laid, shapes, semantics, (budget or Budget()).start(), rank)
        except BudgetSpent as e:
            verdict.status, verdict.reason = "unverified", f"no proof: {e}"
    verdict.seconds = time.perf_counter() - start
    return verdict


def _prove_values(verdict: Verdict, laid: list[Instance], shapes: str, semantics: str,
                  budget: Budget, rank: int = 3):
    rule, bound = verdict.rule, verdict.bound
    scalars = [i for i in laid if not any(n.axes for n in i.outputs)]
    everywhere = bool(scalars) and pointwise(rule) and all(map(pointwise_after, laid))
    instances = scalars if everywhere else laid  # a proof at rank 0 holds for every shape
    if not instances:
        verdict.reason = f"no proof: no instance with lengths <= {bound} could be built"
        return
    ieee = all(fp_encodable(i) for i in instances) and prove_in_floats(
        instances, semantics, budget)
    proved = Proved()
    for inst in () if ieee else instances:
        outcome = prove_instance(inst, semantics, proved, budget)
        if outcome.status == "wrong":
            verdict.status, verdict.counterexample = "wrong", outcome.counterexample
            return
        if outcome.status == "unknown":
            verdict.reason = f"no proof: {outcome.detail}"
            return
    floats = "IEEE float16, float32 and float64; " if ieee else \
        "every op exact in IEEE floats; " if exact(instances) else ""
    scope = "elementwise: every shape"
    if not everywhere:  # the drawn shapes are a sample: never a proof (issue 35)
        structures, why = every_shape(rule, semantics)
        if not structures:
            bounded = prove_within(verdict, semantics, budget, rank, bound, sys.modules[__name__])
            if bounded is not None:
                verdict.reason = (f"no proof for every shape ({why}), nor for ranks <= {rank} "
                                  f"and lengths <= {bound} ({bounded}): z3 held on the "
                                  f"{len(instances)} layouts of {shapes}, a sample of shapes, "
                                  "not a proof")
            return
        scope = (f"every shape: {len(structures)} structures of axis groups, each for every "
                 "length")  # in floats only when exact on them (a sum of 2 rounds)
        floats = "every op exact in IEEE floats; " if exact(structures) else ""
    verdict.status = "proved" if floats else "proved-reals"
    verdict.examples = len(instances)
    verdict.bound = None
    verdict.reason = f"({floats}{scope})"
    loop = next((i.message for i in instances if i.stop != "fixpoint"), "")
    if loop:  # as the verifier says: sound, but the rule alone does not terminate
        verdict.status, verdict.reason = "loops", f"{loop} (each step proved, {scope})"
