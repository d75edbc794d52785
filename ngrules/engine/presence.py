"""Passes that cannot match: a pass whose every rule names an op the graph does not hold is
not walked.

A match binds a node of each op its patterns name but an optional wrapper's (`Op?(p)` may
match p alone, whose ops do count) and of each `x: Op` (`compiled.required_ops`), and
matching compares ops by name, so a rule naming an op no node of the graph has cannot match
anywhere in it. A walk in which no rule matches changes nothing
(no node is rebuilt, none becomes pending, a multi-root round takes nothing), so such a pass
returns its graph as it was: 7 of the 12 passes of rules of the `inference` pipeline on a
ResNet-50. What the walk would have counted is counted all the same (`RewriteResult.stats`:
each rule tried once at each node of an op it can root at; `rounds`: one multi-root round).

The graph's order and op counts are kept between passes (`Census`): a pass that changed
nothing hands the next one the same outputs, whose walk then needs no new order.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ngrules.ir.graph import Node, creation_order

if TYPE_CHECKING:
    from ngrules.engine.driver import _Pass


_OP = operator.attrgetter("op")


class Census:
    """The last graph's outputs, its nodes in creation order and the ops they have (held for
    one rewrite call: the next pass, given the same outputs, reads them again)."""

    def __init__(self) -> None:
        self._outputs: tuple[Node, ...] | None = None
        self.order: list[Node] = []
        self.ops: set[str] = set()
        self._counts: Counter[str] | None = None

    def of(self, outputs: Sequence[Node]) -> Census:
        """This census, of the graph of `outputs` (counted again unless it is the last one)."""
        kept = self._outputs
        if kept is None or len(kept) != len(outputs) \
                or any(a is not b for a, b in zip(kept, outputs)):
            self._outputs = tuple(outputs)
            self.order = creation_order(outputs)
            self.ops, self._counts = set(map(_OP, self.order)), None
        return self

    def nodes_at(self, root_ops: frozenset[str] | None) -> int:
        """How many nodes have one of these ops (None: any op)."""
        if root_ops is None:
            return len(self.order)
        if self._counts is None:  # counted only when a pass is skipped
            self._counts = Counter(map(_OP, self.order))
        counts = self._counts
        return sum(counts.get(op, 0) for op in root_ops)


def skipped(one: _Pass, census: Census) -> bool:
    """Whether no rule of the pass `one` can match in the graph of `census`; if so, what its
    walk and a multi-root round would have counted is counted (and the budget checked)."""
    rules = (*one.single, *one.multi)
    ops = census.ops
    if not all(any(op not in ops for op in r.needs) for r in rules):
        return False
    budget = one.run.budget
    budget.size_for(len(census.order))  # the fuel set from the first walk's graph
    budget.settle(f"matching in pass {one.name}")
    if budget.exhausted:  # tried nowhere
        return True
    for r in rules:  # each tried once at each node of an op it can root at
        r.stats.attempts += census.nodes_at(r.root_ops)
    if one.multi:
        one.run.rounds += 1
    return True
