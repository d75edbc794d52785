"""The cheapest graph in an e-graph: one e-node chosen per class needed, never a cycle.

Greedy (any size): each class's cheapest e-node by tree cost (an argument class used twice
by one e-node counted once), classes settled cheapest first once an e-node of theirs has
all its arguments settled (Knuth's generalisation of Dijkstra's algorithm): a chosen e-node's
arguments are settled before its class, so the choice has no cycle. A subgraph shared by two
users is counted twice while choosing (the result's cost counts it once). A second greedy
choice charges each `Output` of a multi-output op (a fused kernel) 1/k of the op's cost; it
is kept when its DAG cost is lower.

z3 (small e-graphs, when z3 is installed): the exact DAG cost, each chosen e-node counted
once, as a pseudo-Boolean optimisation; acyclicity by an order on the classes (a chosen
e-node's class comes after its arguments'), needed only between classes of one strongly
connected component of the class graph (no cycle leaves one). It runs under a time limit
and is kept only when it beats the greedy choice; otherwise, or when it cannot run, the
greedy choice stands and `Extraction.method` says why.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ngrules.ir.graph import Node
from ngrules.saturation.egraph import EGraph, ENode
from ngrules.saturation.shared import (
    enode_cost,
    launch_penalty,
    postorder,
    reuse,
    shared_choice,
)

#: The most e-nodes (under the roots) z3 is asked about; larger e-graphs are extracted greedily.
Z3_LIMIT = 400


@dataclass
class Extraction:
    """The chosen e-node per class, how it was chosen and its DAG cost."""

    choice: dict[int, ENode]
    method: str  # "z3" or "greedy"
    cost: float
    note: str = ""  # why z3 was not used, or what it found
    outputs: list[Node] = field(default_factory=list)


def greedy(eg: EGraph, classes: Sequence[int], split: bool = False,
           lowered: bool = False) -> dict[int, ENode]:
    """Each class's cheapest e-node by tree cost, in Knuth's generalisation of Dijkstra's
    algorithm: a class is settled, cheapest first, once an e-node of it has every argument
    class settled; so a chosen e-node's arguments were settled before its class, and the
    choice has no cycle whatever the costs. With `split`, a multi-output node's class costs
    1/k of the node (k its outputs), as if the `Output`s that read it shared it. With
    `lowered`, a composite op (an ONNX op kept whole) costs `shared.LOWERED_PENALTY` more, so its
    class takes its body where the e-graph has it (multi-root rules match primitives)."""
    wanted = set(classes)
    waiting: dict[int, int] = {}  # e-node id -> argument classes not yet settled
    users: dict[int, list[ENode]] = {}
    heap: list[tuple[float, int, ENode]] = []
    for c in classes:
        for enode in eg.classes[c]:
            args = set(enode.args)
            if not args <= wanted:
                continue
            waiting[id(enode)] = len(args)
            for a in args:
                users.setdefault(a, []).append(enode)
            if not args:
                heapq.heappush(heap, (_total(enode, {}, split, lowered), id(enode), enode))
    best: dict[int, float] = {}
    choice: dict[int, ENode] = {}
    while heap:
        total, _, enode = heapq.heappop(heap)
        c = enode.cls
        if c in choice:
            continue
        best[c], choice[c] = total, enode
        for user in users.get(c, ()):
            waiting[id(user)] -= 1
            if waiting[id(user)] == 0 and user.cls not in choice:
                heapq.heappush(heap, (_total(user, best, split, lowered), id(user), user))
    return choice


def _total(enode: ENode, best: dict[int, float], split: bool, lowered: bool = False) -> float:
    total = enode_cost(enode) + sum(best[a] for a in set(enode.args))
    if lowered:
        total += launch_penalty(enode)
    outputs = enode.template.outputs
    if split and outputs:  # its k outputs share it: each `Output` of it carries 1/k
        total /= len(outputs)
    return total


def acyclic(choice: dict[int, ENode], roots: Sequence[int]) -> bool:
    """Whether the chosen graph under the roots has no cycle (iterative depth-first search)."""
    return not postorder(choice, roots)[1]


def dag_cost(eg: EGraph, choice: dict[int, ENode], roots: Sequence[int]) -> float:
    """The cost of the chosen graph, each class under the roots counted once."""
    seen: set[int] = set()
    stack, total = list(roots), 0.0
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        enode = choice[c]
        total += enode_cost(enode)
        stack.extend(enode.args)
    return total


def _z3_choice(eg, classes, roots, bound: float, seconds: float):
    """The DAG-optimal choice, or (None, why not)."""
    try:
        import z3
    except ImportError:
        return None, "z3 is not installed (the prove extra)"
    # integer costs, scaled so the largest is at most 1e6 (large coefficients slow z3 down;
    # a symbolic dimension's stand-in length makes costs of 1e11)
    top = max((enode_cost(e) for c in classes for e in eg.classes[c]), default=1.0)
    scale = min(1.0, 1e6 / top)
    opt = z3.Optimize()
    opt.set("timeout", max(1, int(seconds * 1000)))
    active = {c: z3.Bool(f"a{c}") for c in classes}
    order = {c: z3.Int(f"o{c}") for c in classes}
    component = _components(eg, classes)  # a cycle stays inside one: order only there
    picks: list[tuple[z3.BoolRef, ENode]] = []
    terms = []
    for c in classes:
        mine = []
        for k, enode in enumerate(eg.classes[c]):
            if c in enode.args:
                continue  # an e-node over its own class is a cycle
            x = z3.Bool(f"n{c}_{k}")
            mine.append(x)
            picks.append((x, enode))
            for a in enode.args:
                opt.add(z3.Implies(x, active[a]))
                if component[a] == component[c]:
                    opt.add(z3.Implies(x, order[c] > order[a]))
            terms.append(z3.If(x, math.ceil(enode_cost(enode) * scale), 0))
        opt.add(active[c] == z3.Or(mine) if mine else z3.Not(active[c]))
    for r in roots:
        opt.add(active[r])
    total = z3.Sum(terms)
    opt.add(total <= math.ceil(bound * scale) + len(terms))  # each term rounded up
    opt.minimize(total)
    verdict = opt.check()
    if verdict != z3.sat:
        return None, f"z3 answered {verdict} within {seconds:g} s"
    model = opt.model()
    choice: dict[int, ENode] = {}
    for x, enode in picks:
        if z3.is_true(model.eval(x, model_completion=True)):
            choice.setdefault(enode.cls, enode)
    return choice, ""


def _components(eg: EGraph, classes: Sequence[int]) -> dict[int, int]:
    """Each class's strongly connected component in the graph of classes (an edge from a class
    to each argument class of its e-nodes); Tarjan's algorithm, iterative."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    component: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    edges = {c: sorted({a for e in eg.classes[c] for a in e.args}) for c in classes}
    for start in classes:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            c, i = work.pop()
            if i == 0:
                index[c] = low[c] = len(index)
                stack.append(c)
                on_stack.add(c)
            if i < len(edges[c]):
                work.append((c, i + 1))
                a = edges[c][i]
                if a not in index:
                    work.append((a, 0))
                elif a in on_stack:
                    low[c] = min(low[c], index[a])
                continue
            for a in edges[c]:
                if a in on_stack:
                    low[c] = min(low[c], low[a])
            if low[c] == index[c]:
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = c
                    if member == c:
                        break
    return component


def extract(
    eg: EGraph, roots: Sequence[int], use_z3: bool | None = None, seconds: float = 2.0
) -> Extraction:
    """The cheapest choice for the root classes. use_z3: None tries z3 on e-graphs of at most
    `Z3_LIMIT` e-nodes under the roots, True tries it at any size, False never."""
    roots = [eg.find(r) for r in roots]
    classes = eg.reachable(roots)
    choice = greedy(eg, classes)
    cost = dag_cost(eg, choice, roots)
    split = greedy(eg, classes, split=True)  # multi-output ops shared by their outputs
    shared = ""
    split_cost = dag_cost(eg, split, roots) if split != choice else cost
    if split_cost < cost:
        choice, cost = split, split_cost
        shared = " (multi-output ops' cost split among their outputs)"
    for amortised in (shared_choice(eg, classes, roots), reuse(eg, choice, roots)):
        if amortised is not None and amortised != choice:
            amortised = reuse(eg, amortised, roots) or amortised
            amortised_cost = dag_cost(eg, amortised, roots)
            if amortised_cost < cost:
                choice, cost = amortised, amortised_cost
                shared = " (values read by several classes shared)"
    size = sum(len(eg.classes[c]) for c in classes)
    if use_z3 is False:
        return Extraction(choice, "greedy", cost, "z3 not asked for" + shared)
    if use_z3 is None and size > Z3_LIMIT:
        why = f"{size} e-nodes > {Z3_LIMIT}: z3 not tried"
        return Extraction(choice, "greedy", cost, why + shared)
    exact, why = _z3_choice(eg, classes, roots, cost, seconds)
    if exact is not None and not acyclic(exact, roots):  # never expected: the order forbids it
        exact, why = None, "z3's choice had a cycle"
    if exact is None:
        return Extraction(choice, "greedy", cost, why + shared)
    exact_cost = dag_cost(eg, exact, roots)
    if exact_cost < cost:
        return Extraction(exact, "z3", exact_cost, f"greedy's cost was {cost:g}")
    return Extraction(choice, "z3", cost, "z3 found the greedy choice optimal")


def build(eg: EGraph, choice: dict[int, ENode], roots: Sequence[int]) -> tuple[list, dict]:
    """The chosen terms as IR nodes (arguments first), and for each node a rule built, that
    rule (its provenance; recorded as the node's `origin` too, as a greedy rewrite does)."""
    built: dict[int, Node] = {}
    provenance: dict[Node, object] = {}
    stack: list[tuple[int, bool]] = [(eg.find(r), False) for r in roots]
    while stack:
        c, ready = stack.pop()
        if c in built:
            continue
        enode = choice[c]
        if not ready:
            stack.append((c, True))
            stack.extend((a, False) for a in enode.args if a not in built)
            continue
        node = enode.template.with_args(tuple(built[a] for a in enode.args))
        eg.of_term.setdefault(node, c)  # a term of c (no join here: the choice stays valid)
        if enode.rule is not None:
            provenance[node] = enode.rule
            if node.origin is None:
                node.origin = enode.rule
        built[c] = node
    return [built[eg.find(r)] for r in roots], provenance
