"""Instances of a rule: built, rewritten by the rule, or rejected with a reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from ngrules.errors import NgrulesError
from ngrules.ir.graph import Node, toposort
from ngrules.lang.rules import Rule
from ngrules.verification.instances.assumed import Assumed, assumed_nodes, broken
from ngrules.verification.instances.builder import Builder
from ngrules.verification.instances.choices import Reject
from ngrules.verification.instances.classes import constraints, fixed_by_guards
from ngrules.verification.instances.domains import Domain, feeds_for
from ngrules.verification.instances.hints import guard_hints


# -- instances ----------------------------------------------------------------------------------
@dataclass
class Instance:
    """A graph built from a rule's pattern, its inputs, and what rewriting with the rule gave.

    `outputs` are the roots (the graph before); `after` the rewritten outputs (None if the
    rewrite raised `error`); `fired` whether the rule rewrote anything; `stop` the engine's
    reason for stopping. `feeds` holds a value for every placeholder.
    """

    rule: Rule | None
    outputs: list[Node]
    feeds: dict[Node, np.ndarray]
    after: list[Node] | None = None
    fired: bool = False
    stop: str = "fixpoint"
    message: str = ""
    error: BaseException | None = None
    step: list[Node] | None = None  # one rewrite step, when the rule alone does not terminate
    assumed: Assumed = ()  # the rule's assumptions, each with the node its variable is

    @property
    def dtype(self) -> np.dtype:
        return self.outputs[0].dtype

    def __repr__(self) -> str:  # short: hypothesis prints the examples it runs
        name = self.rule.name if self.rule is not None else None
        nodes = len(toposort(self.outputs))
        return f"Instance(rule={name!r}, {nodes} nodes, fired={self.fired})"

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # hypothesis's printer
        printer.text(repr(self))


@dataclass
class Rejected:
    """An attempt that did not give an instance, and why."""

    reason: str


#: Per rule (by identity: axes classes key unnamed positions by id), what its guards and
#: patterns say before any draw; made once per rule, not once per attempt.
_PREPARED: dict[int, tuple] = {}


def prepared(rule: Rule) -> tuple:
    """(rule, guard hints, axes classes, attributes fixed by guards) of the rule."""
    entry = _PREPARED.get(id(rule))
    if entry is None or entry[0] is not rule:
        if len(_PREPARED) >= 256:
            _PREPARED.clear()
        hints = guard_hints(rule)
        cons = constraints(rule.roots, hints)
        entry = _PREPARED[id(rule)] = (rule, hints, cons, fixed_by_guards(rule.roots, hints))
    return entry


def build_roots(draw, rule: Rule) -> tuple[list[Node], dict[Node, Domain], dict[str, Node]]:
    _, hints, cons, fixed = prepared(rule)
    dtype = hints.dtype if hints.dtype is not None else np.dtype(np.float64)
    builder = Builder(draw, dtype, hints, rule.roots, cons, fixed)
    roots = [builder.build(root, None) for root in rule.roots]
    for r in roots:
        if r.outputs is not None:
            raise Reject(f"the root {r.op} has several outputs")
    return roots, builder.domains, builder.bound


class _Built(BaseException):
    """Ends the search at the first graph built (hypothesis lets a BaseException through)."""


def buildable(rule: Rule, attempts: int = 30) -> bool:
    """Whether a graph of the rule's pattern is built within `attempts` draws, its guards
    aside (they are judged when the rule fires): how the corpora's buildability is measured."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable

    @settings(max_examples=attempts, database=None, deadline=None, derandomize=True,
              phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
    @given(st.data())
    def attempt(data):
        try:
            build_roots(data.draw, rule)
        except Reject:
            return
        raise _Built

    try:
        attempt()
    except _Built:
        return True
    except Unsatisfiable:  # every draw rejected inside an op's generator (hypothesis `reject`)
        return False
    return False


def rewrite_instance(rule: Rule, outputs: list[Node], feeds, fuel: int = 200) -> Instance:
    """Rewrite the outputs with this rule alone and record what happened."""
    from ngrules.engine.driver import rewrite

    inst = Instance(rule, outputs, feeds)
    try:
        res = rewrite(outputs, rule, fuel=fuel)
    except NgrulesError as e:
        inst.error, inst.fired = e, True
        return inst
    inst.after, inst.fired = res.outputs, any(f.rule == rule.name for f in res.trace)
    stats = res.stats.get(rule.name)
    if not inst.fired and stats is not None and stats.first_failure is not None:
        inst.error, inst.fired = stats.first_failure, True  # rejected by the engine: ill-formed
    inst.stop, inst.message = res.stop, res.message
    if res.stop != "fixpoint":
        inst.step = one_step(rule, outputs)
    return inst


def one_step(rule: Rule, outputs: list[Node]) -> list[Node]:
    """The outputs after the rule fires once, at the root when it matches there (a rule that
    loops is judged by this step: the driver gives back the graph it started from)."""
    from ngrules.engine.compiled import compiled_for_checks
    from ngrules.engine.driver import rewrite
    from ngrules.ir.graph import substitute

    found = compiled_for_checks(rule).apply(outputs[0]) if len(rule.roots) == 1 else None
    if found is None:
        return rewrite(outputs, rule, fuel=1).outputs
    roots, replacements = found[0], found[1]
    return substitute(outputs, dict(zip(roots, replacements)))


def taken_by(earlier: Sequence, root: Node) -> str | None:
    """The first of the earlier (compiled, single-root) rules of a pass that matches at root:
    in the pass it wins, so the later rule never sees this node."""
    for compiled in earlier:
        try:
            found = compiled.apply(root)
        except NgrulesError:
            return compiled.name
        if found is not None:
            return compiled.name
    return None


def earlier_rules(rule: Rule, ruleset) -> list:
    """The single-root rules tried before `rule` in its pass (compiled), given a RuleSet."""
    from ngrules.engine.compiled import compiled_for_checks

    order = ruleset.passes.get(rule.pass_name, ()) if ruleset is not None else ()
    before = order[: order.index(rule)] if rule in order else ()
    return [compiled_for_checks(r) for r in before if len(r.roots) == 1]


def why_not(rule: Rule, roots: Sequence[Node]) -> str:
    """The first pattern element or guard that failed at the instance's root (from explain)."""
    from ngrules.engine.explain import explain

    misses = explain(rule, list(roots), limit=1).misses
    return str(misses[0]) if misses else "no candidate root"


@st.composite
def attempts(draw, rule: Rule, earlier: Sequence = ()) -> Instance | Rejected:
    """One try at an instance of the rule: an Instance (rewritten), or Rejected with a reason.
    `earlier` are compiled rules that come first in the rule's pass (see `earlier_rules`)."""
    try:
        roots, domains, bound = build_roots(draw, rule)
    except Reject as r:
        return Rejected(str(r))
    winner = taken_by(earlier, roots[0])
    if winner is not None:
        return Rejected(f"rule {winner} comes first in pass {rule.pass_name} and takes it")
    special = draw(st.booleans())
    assumed = assumed_nodes(rule.assumptions, bound)
    ranges = {node: a for a, node in assumed if node.op == "Placeholder"}
    feeds = feeds_for(roots, draw(st.integers(0, 2**32 - 1)), domains, special, ranges)
    missed = broken(assumed, feeds)
    if missed is not None:
        return Rejected(f"the values drawn break the assumption `{missed}`")
    inst = rewrite_instance(rule, roots, feeds)
    inst.assumed = assumed
    if not inst.fired:
        return Rejected(f"the rule did not fire: {why_not(rule, roots)}")
    return inst


def instances(rule: Rule, ruleset=None) -> st.SearchStrategy[Instance]:
    """Instances of the rule's pattern that the rule fires on, with inputs and the rewrite.
    Given the rule's RuleSet, nodes an earlier rule of its pass would take are left out."""
    built = attempts(rule, earlier_rules(rule, ruleset))
    return built.filter(lambda attempt: isinstance(attempt, Instance))
