"""Choices that count a shared value once, for e-graphs too large for z3.

Greedy extraction chooses by tree cost: a value read by k classes is paid k times. That hides
the graphs equality saturation is for when it merges work: Tensat's merge of products that
share an operand makes one larger product read by its slices, cheaper as a DAG and dearer
per tree. Two further choices, each kept by `extract.extract` only when its DAG cost is lower:

- `shared_choice`: an argument class costs each reader 1/fanout of its cost (fanout: the
  classes with an e-node over it). Knuth's settle-cheapest-first order needs costs that grow
  from arguments to users, which such costs break, so they are relaxed to a fixpoint from the
  leaves up; an e-node that closes a cycle of the choice is banned and the costs relaxed again.
- `reuse`: within a chosen graph, each class takes the cheapest e-node over classes already
  computed earlier in that graph (of equal costs, the one reading the earliest value): a
  slice of a slice becomes a slice of the merged value, and the chain between goes.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

from ngrules.ir import composite
from ngrules.saturation.costs import node_cost
from ngrules.saturation.egraph import EGraph, ENode

#: What a composite e-node (an ONNX op kept whole) costs more in the `lowered` choices (the
#: graph multi-root rules match besides the best one): more than any graph costs.
LOWERED_PENALTY = 1e30


def enode_cost(enode: ENode) -> float:
    """The cost model's cost of one e-node, computed once."""
    found = enode.cost
    if found is None:
        found = enode.cost = node_cost(enode.template)
    return found


def launch_penalty(enode: ENode) -> float:
    """`LOWERED_PENALTY` for a composite e-node, else 0."""
    return LOWERED_PENALTY if composite.is_composite(enode.op) else 0.0


def fanout(eg: EGraph, classes: Sequence[int]) -> dict[int, int]:
    """For each class, how many of the classes may read it (have an e-node over it)."""
    readers: dict[int, set[int]] = {}
    for c in classes:
        for enode in eg.classes[c]:
            for a in enode.args:
                readers.setdefault(a, set()).add(c)
    return {a: len(r) for a, r in readers.items()}


def shared_choice(eg: EGraph, classes: Sequence[int], roots: Sequence[int],
                  lowered: bool = False, repairs: int = 30) -> dict[int, ENode] | None:
    """Each class's cheapest e-node with argument costs shared among their readers; None
    when a root has no choice or cycles remain after `repairs` bans."""
    roots = [eg.find(r) for r in roots]
    graph = _Readers(eg, classes, lowered)
    banned: set[int] = set()
    for _ in range(repairs):
        choice = graph.relaxed(banned)
        if any(r not in choice for r in roots):
            return None
        closing = postorder(choice, roots)[1]
        if not closing:
            return choice
        banned.update(id(e) for e in closing)
    return None


class _Readers:
    """The e-nodes under the classes with what relaxing their costs reads, gathered once
    for every repair: each e-node's own cost and its argument classes with their shares
    (1 / fanout), each class's readers, and the leaves."""

    def __init__(self, eg: EGraph, classes: Sequence[int], lowered: bool):
        wanted = set(classes)
        fan = fanout(eg, classes)
        self.users: dict[int, list[ENode]] = {}
        self.leaves: list[ENode] = []
        self.terms: dict[int, tuple[float, tuple[tuple[int, float], ...]]] = {}
        for c in classes:
            for enode in eg.classes[c]:
                args = set(enode.args)
                if not args <= wanted:
                    continue
                own = enode_cost(enode) + (launch_penalty(enode) if lowered else 0.0)
                self.terms[id(enode)] = (own, tuple((a, 1.0 / fan.get(a, 1)) for a in args))
                for a in args:
                    self.users.setdefault(a, []).append(enode)
                if not args:
                    self.leaves.append(enode)

    def relaxed(self, banned: set[int], passes: int = 30) -> dict[int, ENode]:
        """Shared costs relaxed from the leaves up (a work list of the e-nodes whose
        arguments' costs fell), at most `passes` times the e-nodes' count of steps."""
        best: dict[int, float] = {}
        choice: dict[int, ENode] = {}
        work: deque[ENode] = deque(e for e in self.leaves if id(e) not in banned)
        steps = passes * max(len(self.terms), 1)
        while work and steps:
            steps -= 1
            enode = work.popleft()
            if id(enode) in banned:
                continue
            own, args = self.terms[id(enode)]
            try:
                total = own + sum(best[a] * share for a, share in args)
            except KeyError:  # an argument without a cost yet: its turn comes later
                continue
            c = enode.cls
            if total < best.get(c, math.inf) * (1 - 1e-9):
                best[c], choice[c] = total, enode
                work.extend(self.users.get(c, ()))
        return choice


def postorder(choice: dict[int, ENode], roots: Sequence[int]) -> tuple[list[int], list[ENode]]:
    """The classes under the roots in the chosen graph, arguments first (an iterative
    depth-first search), and the chosen e-nodes whose argument closes a cycle (its back
    edges: none when the choice is acyclic)."""
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    order: list[int] = []
    closing: list[ENode] = []
    for root in roots:
        if state.get(root) == 2:
            continue
        state[root] = 1
        stack = [(root, iter(choice[root].args))]
        while stack:
            c, args = stack[-1]
            a = next(args, None)
            if a is None:
                state[c] = 2
                order.append(c)
                stack.pop()
            elif state.get(a) == 1:
                closing.append(choice[c])
            elif a not in state:
                state[a] = 1
                stack.append((a, iter(choice[a].args)))
    return order, closing


def _heights(choice: dict[int, ENode], roots: Sequence[int]) -> dict[int, int]:
    """Each class under the roots in the chosen (acyclic) graph: 0 for a leaf, else one more
    than its highest argument."""
    height: dict[int, int] = {}
    for c in postorder(choice, roots)[0]:
        height[c] = 1 + max((height[a] for a in choice[c].args), default=-1)
    return height


def reuse(eg: EGraph, choice: dict[int, ENode] | None,
          roots: Sequence[int]) -> dict[int, ENode] | None:
    """The choice with each class re-chosen among its e-nodes over classes lower in the
    chosen graph (so no cycle can form): the cheapest, and of equal costs the one reading
    the lowest classes."""
    if choice is None:
        return None
    roots = [eg.find(r) for r in roots]
    height = _heights(choice, roots)
    out = dict(choice)
    for c, h in height.items():
        options = [e for e in eg.classes[c]
                   if all(a in height and height[a] < h for a in e.args)]
        if options:
            out[c] = min(options, key=lambda e: (enode_cost(e),
                                                 max((height[a] for a in e.args), default=-1)))
    return out
