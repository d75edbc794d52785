"""Rules matched on an e-graph through term views, with the engine's own matchers.

A rule's pattern reads a fixed part of the graph below its root: its `Shape`, which says, at
each position, which e-nodes to expand (those of the ops the pattern can match there) and how
to view their arguments; a variable reads nothing (the class's witness term stands for it).
At an e-node, the *views* are the concrete terms with that e-node at the root and, below it,
every choice of e-node the shape expands. `CompiledRule.apply` runs on each view as on any
graph: commutative orders, optional wrappers, literals, typed variables, guards and lets
behave exactly as in a greedy rewrite. A view tried once with a rule is never tried again
(terms are hash-consed, and a match depends only on the term).

Views are capped per e-node and per class (`VIEW_CAP`): a class with many members shows the
rules its first ones, so a very wide class may hide a match (counted in `capped`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from itertools import islice, product

from ngrules.engine.compiled import CompiledRule
from ngrules.engine.semantics import is_commutative
from ngrules.ir.graph import Node
from ngrules.ir.ops import OPS
from ngrules.lang.syntax import PNamed, POp, PVar
from ngrules.saturation.egraph import EGraph, ENode
from ngrules.saturation.folding import FoldRule

#: The most views built per e-node and per class.
VIEW_CAP = 64


@dataclass(frozen=True)
class Shape:
    """What a pattern reads at one position: the e-nodes of `ops` (None: of any op) are
    expanded, argument i viewed by `args[i]` (`rest` past them; None: the witness only), and
    with `witness` the class's witness is a view too. With `swap` (a commutative op), the two
    arguments are also viewed the other way round: the matcher tries both orders of a view,
    so one expanded argument at a time suffices (not every pair)."""

    ops: frozenset[str] | None
    args: tuple[Shape | None, ...] = ()
    rest: Shape | None = None
    witness: bool = False
    swap: bool = False

    def arg(self, i: int) -> Shape | None:
        return self.args[i] if i < len(self.args) else self.rest

    @property
    def depth(self) -> int:
        """How many levels below its position the shape reads (its arguments' witnesses: 1)."""
        below = [s.depth for s in (*self.args, self.rest) if s is not None]
        return 1 + max(below, default=0)


#: Any e-node, its arguments' witnesses: what a typed variable reads (its node's op).
_ONE_LEVEL = Shape(None)


def value_shape() -> Shape:
    """What a literal, a `constant` kind or constant folding reads at a position: a known
    value, a Constant perhaps under two views (a class with a Constant has it as witness)."""
    ops = frozenset(op for op, d in OPS.items() if d.has("view")) | {"Constant"}
    return Shape(ops, rest=Shape(ops, witness=True), witness=True)


def merge(a: Shape | None, b: Shape | None) -> Shape | None:
    """A shape that reads everything a and b read."""
    if a is None or b is None:
        other = b if a is None else a
        return None if other is None else _with_witness(other)
    ops = None if a.ops is None or b.ops is None else a.ops | b.ops
    count = max(len(a.args), len(b.args))
    args = tuple(merge(a.arg(i), b.arg(i)) for i in range(count))
    return Shape(ops, args, merge(a.rest, b.rest), a.witness or b.witness, a.swap or b.swap)


def _with_witness(shape: Shape) -> Shape:
    return Shape(shape.ops, shape.args, shape.rest, True, shape.swap)


def shape_of(pattern) -> Shape | None:
    """The shape a pattern reads at its position (see `Shape`)."""
    if isinstance(pattern, PNamed):
        return shape_of(pattern.pattern)
    if isinstance(pattern, PVar):
        if pattern.kind is None:
            return None
        return Shape(frozenset({pattern.kind})) if pattern.kind in OPS else value_shape()
    if isinstance(pattern, POp):
        args = tuple(shape_of(a) for a in pattern.args)
        swap = is_commutative(pattern.op) and len(args) == 2  # matched in either order
        here = Shape(frozenset({pattern.op}), args, swap=swap)
        return merge(here, shape_of(pattern.args[0])) if pattern.optional else here
    return value_shape()  # a literal


def root_shape(rule) -> Shape:
    """The shape of a rule's (first) root; a rule's stand-in (`FoldRule`) gives its own."""
    own = getattr(rule, "shape", None)
    if own is not None:
        return own
    return shape_of(rule.rule.roots[0]) or _ONE_LEVEL


class Match:
    """A rule matched at a class: its replacement, to be added and joined with the class."""

    __slots__ = ("rule", "cls", "replacement")

    def __init__(self, rule: CompiledRule | FoldRule, cls: int, replacement: Node):
        self.rule, self.cls, self.replacement = rule, cls, replacement


class Searcher:
    """The rules, indexed by root op, and the (rule, view) pairs already tried."""

    def __init__(self, rules: list[CompiledRule | FoldRule]):
        self.rules = rules
        self.shapes = [root_shape(r) for r in rules]
        #: How far above a changed class a view can change: the deepest shape.
        self.reach = max((shape.depth for shape in self.shapes), default=1)
        self._at: dict[str, list[int]] = {}
        self.tried: set[tuple[int, Node]] = set()
        self.capped = 0  # views left out by the cap, over the whole run

    def rules_at(self, op: str) -> list[int]:
        found = self._at.get(op)
        if found is None:
            found = self._at[op] = [
                i for i, r in enumerate(self.rules) if r.root_ops is None or op in r.root_ops
            ]
        return found

    def search(
        self, eg: EGraph, deadline: float, only: set[int] | None = None
    ) -> tuple[list[Match], bool]:
        """Every new match in the e-graph as it stands (at the e-nodes of the classes `only`,
        when given: those whose views may have changed); and whether the deadline cut it
        short."""
        views = _Views(eg, self)
        found: list[Match] = []
        tried, rules, shapes = self.tried, self.rules, self.shapes
        steps = 0
        classes = eg.classes.items() if only is None else (
            (c, eg.classes[c]) for c in sorted(only) if c in eg.classes)
        for cls, enodes in list(classes):
            for enode in list(enodes):
                for i in self.rules_at(enode.op):
                    for term in views.of_enode(enode, shapes[i]):
                        if (i, term) in tried:
                            continue
                        tried.add((i, term))
                        result = rules[i].apply(term)
                        if result is not None:
                            found.append(Match(rules[i], cls, result[1][0]))
                        steps += 1
                        if steps % 64 == 0 and time.perf_counter() > deadline:
                            return found, True
        return found, False


class _Views:
    """Term views of one e-graph state (see the module's docstring), built on demand."""

    def __init__(self, eg: EGraph, searcher: Searcher):
        self.eg, self.searcher = eg, searcher
        self._classes: dict[tuple[int, Shape], list[Node]] = {}
        self._enodes: dict[tuple[int, Shape], list[Node]] = {}

    def of_class(self, cls: int, shape: Shape | None) -> list[Node]:
        eg = self.eg
        cls = eg.find(cls)
        if shape is None:
            return [eg.witness[cls]]
        key = (cls, shape)
        found = self._classes.get(key)
        if found is None:
            seen: dict[Node, None] = {eg.witness[cls]: None} if shape.witness else {}
            ops = shape.ops
            for enode in eg.classes[cls]:
                if ops is not None and enode.template.op not in ops:
                    continue
                for term in self.of_enode(enode, shape):
                    seen[term] = None
                if len(seen) >= VIEW_CAP:
                    self.searcher.capped += 1
                    break
            found = self._classes[key] = list(islice(seen, VIEW_CAP))
        return found

    def of_enode(self, enode: ENode, shape: Shape) -> list[Node]:
        """The views of one e-node, its arguments viewed as `shape` says."""
        key = (id(enode), shape)
        found = self._enodes.get(key)
        if found is None:
            shapes = [shape.arg(i) for i in range(len(enode.args))]
            terms = self._terms(enode, shapes)
            if shape.swap and len(shapes) == 2 and shapes[0] != shapes[1]:
                terms.update(self._terms(enode, shapes[::-1]))
            found = self._enodes[key] = list(islice(terms, VIEW_CAP))
        return found

    def _terms(self, enode: ENode, shapes: list) -> dict[Node, None]:
        template, eg = enode.template, self.eg
        below = [self.of_class(a, s) for a, s in zip(enode.args, shapes)]
        if all(len(b) == 1 and b[0] is w for b, w in zip(below, template.args)):
            return {template: None}
        terms: dict[Node, None] = {}
        for args in islice(product(*below), VIEW_CAP):
            term = template.with_args(tuple(args))
            eg.note_term(term, enode.cls)
            terms[term] = None
        return terms
