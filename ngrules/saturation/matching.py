"""Rules matched on an e-graph through term views, with the engine's own matchers.

A rule's pattern reaches a fixed depth below its root. At an e-node, the *views* are the
concrete terms with that e-node at the root and, below it, every choice of e-node in each
argument class down to that depth (witness terms further down). `CompiledRule.apply` runs on
each view as on any graph: commutative orders, optional wrappers, literals, typed variables,
guards and lets behave exactly as in a greedy rewrite. A view tried once with a rule is never
tried again (terms are hash-consed, and a match depends only on the term).

Views are capped per e-node and per class (`VIEW_CAP`): a class with many members shows the
rules its first ones, so a very wide class may hide a match (counted in `capped`).
"""

from __future__ import annotations

import time
from itertools import islice, product

from ngrules.engine.compiled import CompiledRule
from ngrules.ir.graph import Node
from ngrules.lang.syntax import PLit, PNamed, POp, PVar
from ngrules.saturation.egraph import EGraph, ENode
from ngrules.saturation.folding import FoldRule

#: The most views built per e-node and per class at one depth.
VIEW_CAP = 64

#: How deep a literal looks: a constant under one view (`Broadcast(Constant)`).
_LITERAL_DEPTH = 2


def pattern_depth(pattern) -> int:
    """How many levels below its root a pattern reads (a variable reads none; a typed
    variable reads its node's op; a literal reads through one broadcast)."""
    if isinstance(pattern, PNamed):
        return pattern_depth(pattern.pattern)
    if isinstance(pattern, PVar):
        return 1 if pattern.kind is not None else 0
    if isinstance(pattern, PLit):
        return _LITERAL_DEPTH
    if isinstance(pattern, POp):
        return 1 + max((pattern_depth(a) for a in pattern.args), default=0)
    return 1


class Match:
    """A rule matched at a class: its replacement, to be added and joined with the class."""

    __slots__ = ("rule", "cls", "replacement")

    def __init__(self, rule: CompiledRule | FoldRule, cls: int, replacement: Node):
        self.rule, self.cls, self.replacement = rule, cls, replacement


class Searcher:
    """The rules, indexed by root op, and the (rule, view) pairs already tried."""

    def __init__(self, rules: list[CompiledRule | FoldRule]):
        self.rules = rules
        self.depths = [
            getattr(r, "depth", None) or max(1, pattern_depth(r.rule.roots[0])) for r in rules
        ]
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

    def search(self, eg: EGraph, deadline: float) -> tuple[list[Match], bool]:
        """Every new match in the e-graph as it stands; and whether the deadline cut it short."""
        views = _Views(eg, self)
        found: list[Match] = []
        tried, rules, depths = self.tried, self.rules, self.depths
        steps = 0
        for cls, enodes in list(eg.classes.items()):
            for enode in list(enodes):
                for i in self.rules_at(enode.op):
                    for term in views.of_enode(enode, depths[i]):
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
        self._classes: dict[tuple[int, int], list[Node]] = {}
        self._enodes: dict[tuple[int, int], list[Node]] = {}

    def of_class(self, cls: int, depth: int) -> list[Node]:
        eg = self.eg
        cls = eg.find(cls)
        if depth <= 0:
            return [eg.witness[cls]]
        key = (cls, depth)
        found = self._classes.get(key)
        if found is None:
            seen: dict[Node, None] = {}
            for enode in eg.classes[cls]:
                for term in self.of_enode(enode, depth):
                    seen[term] = None
                if len(seen) >= VIEW_CAP:
                    self.searcher.capped += 1
                    break
            found = self._classes[key] = list(islice(seen, VIEW_CAP))
        return found

    def of_enode(self, enode: ENode, depth: int) -> list[Node]:
        key = (id(enode), depth)
        found = self._enodes.get(key)
        if found is None:
            template, eg = enode.template, self.eg
            if not enode.args:
                found = [template]
            else:
                below = [self.of_class(a, depth - 1) for a in enode.args]
                found = []
                for args in islice(product(*below), VIEW_CAP):
                    term = template.with_args(tuple(args))
                    eg.note_term(term, enode.cls)
                    found.append(term)
            self._enodes[key] = found
        return found
