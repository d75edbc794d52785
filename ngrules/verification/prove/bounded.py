"""Bounded proofs: every instance of a pattern within ranks <= R and lengths <= L, enumerated.

Where no proof for every shape exists (`groups`), a rule may still be proved for every shape
within a bound (issue 35). The instance builder makes a graph of the pattern by a series of
choices (`draw`): here each choice is **enumerated**, not drawn, depth first over the tree of
choices (every rank, axis length, axis subset and order, optional wrapper, operand order, op
of a trait the builder can choose), every tensor kept to at most R axes (a flattened axis
counting the axes it holds) of length at most L, and each graph then taken in every layout
of its leaves (`layouts`). The result is every graph the builder can make of the pattern
within the bound, never a sample, or an `Unbounded` saying why there is none:

- a choice over values (a random constant's seed, a constant's value) is not a shape: a
  constant the pattern types (`c: Constant`) holds a marker value here, and the prover reads
  each of its elements as a variable (`symbolic_constants`): proved for every value. A value a
  guard fixes from the shapes (`value(c) == 0`, `value(n) * size(m) == size(x)`) is the one
  built; a rule that reads any other constant's value (`value(`, `is_constant(`) is refused
  (its values would be a sample);
- an op whose attributes or axes come from a sample of its generator (a `Relu`'s slope, an
  op without a plan) is refused: its attributes would be a sample;
- more than `MAX_BUILDS` graphs built or `MAX_LAYOUTS` layouts, and the bound is refused:
  the verdict says so, never a partial proof.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Iterator

import numpy as np
from hypothesis import strategies as st
from hypothesis.strategies._internal.core import PermutationStrategy
from hypothesis.strategies._internal.misc import BooleansStrategy, JustStrategy
from hypothesis.strategies._internal.numbers import IntegersStrategy
from hypothesis.strategies._internal.strategies import SampledFromStrategy

from ngrules.ir.axes import Axes
from ngrules.ir.frontend import placeholder
from ngrules.ir.graph import Node, format_graph, make_node, substitute, toposort
from ngrules.lang.rules import Rule
from ngrules.verification.instances import generic, plans
from ngrules.verification.instances.assumed import assumed_nodes
from ngrules.verification.instances.builder import Builder
from ngrules.verification.instances.choices import (
    LENGTHS,
    NEGATE,
    SHORT_LENGTHS,
    VALUES,
    Reject,
    interleave,
)
from ngrules.verification.instances.domains import feeds_for
from ngrules.verification.instances.sampling import Instance, prepared, rewrite_instance
from ngrules.verification.layouts import layouts

#: The default bound: ranks and lengths up to 3.
RANK, LENGTH = 3, 3
#: Graphs built (leaves of the tree of choices) and distinct layouts proved, at most.
MAX_BUILDS, MAX_LAYOUTS = 2_000, 1_500
#: Integer choices with more values than this are values (a seed), not shapes: not enumerated.
_MAX_CHOICES = 64
#: A typed constant's value: k-th constant of a graph holds MARKS[0] + k * MARKS[1] (exact in
#: float16), read back by the prover as a variable per element.
MARKS = (3.375, 0.25)
#: Rule text that reads a constant's value: its constants cannot be read as any value.
READS_VALUES = re.compile(r"\bvalue\(|\bis_constant\(")


class Unbounded(Exception):
    """No bounded proof: the enumeration is not exhaustive or too large; the message says why."""


# -- the tree of choices ------------------------------------------------------------------------
def _unwrapped(strategy):
    return getattr(strategy, "wrapped_strategy", strategy)


def _options(strategy, length: int) -> list | None:
    """Every value of a choice over shapes (None: a value, not a shape, or not finite)."""
    if strategy is LENGTHS or strategy is SHORT_LENGTHS:
        return list(range(1, length + 1))
    if strategy is VALUES or strategy is NEGATE:
        return None
    s = _unwrapped(strategy)
    if isinstance(s, BooleansStrategy):
        return [False, True]
    if isinstance(s, IntegersStrategy) and s.start is not None and s.end is not None \
            and s.end - s.start < _MAX_CHOICES:
        return list(range(s.start, s.end + 1))
    if isinstance(s, PermutationStrategy):
        return [list(p) for p in itertools.permutations(s.values)]
    if isinstance(s, SampledFromStrategy | JustStrategy) and not s._transformations:
        distinct: list = []
        for e in s.elements:
            if not any(e is d or (type(e) is type(d) and e == d) for d in distinct):
                distinct.append(e)
        return distinct
    return None


_FIXED: dict[str, object] = {}


def _first(strategy):
    """The first value of a choice made inside an op's generator (not enumerated)."""
    s = _unwrapped(strategy)
    if isinstance(s, PermutationStrategy):
        return list(s.values)
    if isinstance(s, BooleansStrategy):
        return False
    if isinstance(s, IntegersStrategy) and s.start is not None:
        return s.start
    if isinstance(s, SampledFromStrategy | JustStrategy) and not s._transformations:
        return s.elements[0]
    return _fixed(strategy)


def _fixed(strategy):
    """One value of a choice that is not enumerated: its simplest (hypothesis's `find`)."""
    from hypothesis import HealthCheck, find, settings

    key = repr(strategy)
    if key not in _FIXED:
        run = settings(database=None, max_examples=50, suppress_health_check=list(HealthCheck))
        try:
            _FIXED[key] = find(strategy, lambda _: True, settings=run)
        except Exception as e:  # noqa: BLE001 - an unsatisfiable strategy: no such graph
            raise Reject(f"no value for {key}: {e}") from None
    return _FIXED[key]


_SAMPLE, _ARG_DTYPES = generic.sample.__code__, generic.arg_dtypes.__code__
_INTERLEAVE = interleave.__code__
_PLANS = (plans._plan_reduce.__code__, plans._plan_dot.__code__)


def _generator_op(frame) -> tuple[str, bool] | None:
    """(op, only its arguments' dtypes are read) when the draw is made by an op's generator
    (`generic.sample`), else None."""
    while frame is not None:
        if frame.f_code is _SAMPLE:
            return frame.f_locals.get("op", "?"), frame.f_back.f_code is _ARG_DTYPES
        frame = frame.f_back
    return None


class _Path:
    """One path through the tree of choices: `prefix` replayed, then the first option each."""

    def __init__(self, prefix: list[int], length: int):
        self.prefix, self.length = prefix, length
        self.trail: list[tuple[int, int]] = []  # (option taken, options) per choice
        self.sampled: set[str] = set()  # choices drawn, not enumerated (an op's generator)

    def __call__(self, strategy):
        caller = sys._getframe(1).f_code
        if caller is _INTERLEAVE and isinstance(_unwrapped(strategy), PermutationStrategy
                                                | BooleansStrategy):
            return _first(strategy)  # the axes inserted one by one at every place: every order
        # once, without their permutations nor the canonical order
        generator = _generator_op(sys._getframe(1))
        if generator is not None:
            op, dtypes_only = generator
            if not dtypes_only:
                self.sampled.add(f"{op} takes attributes from its generator")
            return _first(strategy)
        options = _options(strategy, self.length)
        if options is None:  # a constant's value (a variable to the prover), else a sample
            if strategy is not VALUES and strategy is not NEGATE:
                self.sampled.add(f"the builder draws from {strategy!r}")
            return _fixed(strategy)
        if not options:
            raise Reject("a choice with no option")
        at = len(self.trail)
        taken = self.prefix[at] if at < len(self.prefix) else 0
        self.trail.append((taken, len(options)))
        return options[taken]

    def next_prefix(self) -> list[int] | None:
        """The next path, depth first; None when the tree is done."""
        for i in range(len(self.trail) - 1, -1, -1):
            taken, count = self.trail[i]
            if taken + 1 < count:
                return [t for t, _ in self.trail[:i]] + [taken + 1]
        return None


_DTYPES: dict[str, list] = {}


class _BoundedBuilder(Builder):
    """The builder with at most `rank` new axes at once and marker values for typed constants."""

    rank = RANK
    reads_values = False

    def __init__(self, path: _Path, dtype, hints, roots, cons, fixed):
        # `push` False: value domains only
        super().__init__(lambda _: False, dtype, hints, roots, cons, fixed)
        self.draw = path
        self.arg_dtypes = _DTYPES  # what generic.arg_dtypes finds of an op: the same each time

    def fresh(self, n: int) -> Axes:
        """n new axes; Reject before their lengths are chosen when the operand they are for
        has more than `rank` axes (a reduction's: its result's and these; a Dot's: its side's
        kept axes and these)."""
        plan = sys._getframe(1)
        at_least = n
        if plan.f_code is _PLANS[0]:
            at_least += len(plan.f_locals["want"].leaves())
        elif plan.f_code is _PLANS[1] and "k" in plan.f_locals:
            want, k = plan.f_locals["want"], plan.f_locals["k"]
            at_least += max(len(Axes(want[:k]).leaves()), len(Axes(want[k:]).leaves()))
        if at_least > self.rank:
            raise Reject(f"{at_least} axes at least: above the bound")
        return super().fresh(n)

    def build(self, p, want: Axes | None, domain="real") -> Node:
        if want is not None and len(want.leaves()) > self.rank:  # pruned before it is built
            raise Reject(f"axes {want!r} above the bound")
        return super().build(p, want, domain)

    def constant(self, want: Axes | None, domain, at=None) -> Node:
        asked = self.solve(self.hints.values.get(getattr(at, "name", "_"), ()), (int, float))
        if asked is not None:  # a guard fixes the value from the shapes: the one that fires
            return super().constant(want, domain, at)
        if self.reads_values:
            raise Unbounded("the rule reads the value of a constant it does not fix: its "
                            "values would be a sample")
        axes = want if want is not None else self.free_axes(at)
        self.marks = getattr(self, "marks", 0) + 1
        mark = MARKS[0] + (self.marks - 1) * MARKS[1]
        scalar = make_node("Constant", value=np.asarray(mark, self.dtype), axes=())
        if not len(axes):
            return scalar
        if self.draw(st.booleans()):
            return make_node("Broadcast", (scalar,), axes=axes)
        return make_node("Constant", value=np.full(axes.lengths, mark, self.dtype), axes=axes)


def _within(roots: list[Node], rank: int, length: int) -> bool:
    for node in toposort(roots):
        if node.outputs is not None:
            continue
        leaves = node.axes.leaves()
        if len(leaves) > rank or any(a.length > length for a in leaves):
            return False
    return True


def _build(rule: Rule, path: _Path, rank: int) -> Instance | None:
    _, hints, cons, fixed = prepared(rule)  # once per rule, not per build
    dtype = hints.dtype if hints.dtype is not None else np.dtype(np.float64)
    builder = _BoundedBuilder(path, dtype, hints, rule.roots, cons, fixed)
    builder.rank = rank
    builder.reads_values = bool(READS_VALUES.search(rule.source or ""))
    try:
        roots = [builder.build(root, None) for root in rule.roots]
    except Reject:
        return None
    if any(r.outputs is not None for r in roots) or not _within(roots, rank, path.length):
        return None
    assumed = assumed_nodes(rule.assumptions, builder.bound)
    ranges = {node: a for a, node in assumed if node.op == "Placeholder"}
    feeds = feeds_for(roots, 0, builder.domains, False, ranges)
    inst = rewrite_instance(rule, roots, feeds)
    inst.assumed = assumed
    return inst if inst.fired else None


def graphs(rule: Rule, rank: int = RANK, length: int = LENGTH,
           budget=None) -> tuple[list[Instance], int]:
    """Every graph of the rule's pattern the builder can make within the bound that the rule
    fires on (distinct, rewritten), and how many were built. Unbounded if not exhaustive;
    BudgetSpent when the proof's `budget` runs out."""
    found: dict[str, Instance] = {}
    prefix: list[int] | None = []
    builds = 0
    while prefix is not None:
        builds += 1
        if budget is not None and builds % 200 == 0:
            budget.left()
        if builds > MAX_BUILDS:
            raise Unbounded(f"more than {MAX_BUILDS} graphs within the bound")
        path = _Path(prefix, length)
        inst = _build(rule, path, rank)
        if path.sampled:
            raise Unbounded(f"{'; '.join(sorted(path.sampled))}: a sample, not enumerated")
        if inst is not None:
            found.setdefault(_key(inst), inst)
        prefix = path.next_prefix()
    return list(found.values()), builds


def _key(inst: Instance) -> str:
    """The graph's text with the lengths of the axes a flattened axis holds (printed as one)."""
    nodes = toposort(inst.outputs)
    leaves = [(a.name, a.length) for n in nodes if n.outputs is None for a in n.axes.leaves()]
    return f"{format_graph(inst.outputs)}\n{leaves}"


def every_layout(found: list[Instance]) -> Iterator[Instance]:
    """Each graph in every layout of its leaves the rule fires on (distinct)."""
    seen: set[str] = set()
    for inst in found:
        for laid in layouts(inst):
            key = _key(laid)
            if key not in seen:
                seen.add(key)
                if len(seen) > MAX_LAYOUTS:
                    raise Unbounded(f"more than {MAX_LAYOUTS} layouts within the bound")
                yield laid


def _mark(node: Node) -> int | None:
    """k when node is a typed constant's marker (every element MARKS[0] + k * MARKS[1]), else
    None."""
    if node.op != "Constant":
        return None
    value = np.asarray(node.attrs["value"], np.float64)
    if value.size == 0 or not np.all(value == value.flat[0]):
        return None
    k = (float(value.flat[0]) - MARKS[0]) / MARKS[1]
    return int(k) if k >= 0 and k == int(k) and k < 64 else None


def symbolic_constants(inst: Instance) -> Instance:
    """The instance with each typed constant of its graph (a marker value) a placeholder: the
    prover then reads each of its elements as a variable. A constant the rewrite made is left
    as it is (equal to a marker or not). Without typed constants: `inst` itself (`within`
    tells the two apart by identity)."""
    before = toposort(inst.outputs)
    marks = {n: placeholder(n.axes, dtype=n.dtype, name=f"const{k}")
             for n in before if (k := _mark(n)) is not None}
    if not marks:
        return inst
    after = inst.after if inst.stop == "fixpoint" else inst.step
    out = Instance(inst.rule, substitute(inst.outputs, marks), inst.feeds,
                   substitute(after, marks) if after is not None else None, inst.fired,
                   "fixpoint", inst.message, inst.error)
    out.assumed = tuple((a, marks.get(n, n)) for a, n in inst.assumed)
    return out
