"""Whole-graph traversals: every node reachable from some outputs, in an order, and its users.
They read only `args` (and a node's creation number), so they live apart from the node type
and its hash-consing table (`graph` re-exports them)."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ngrules.ir.graph import Node


def toposort(outputs: Iterable[Node]) -> list[Node]:
    """Every node reachable from `outputs`, arguments before users (a depth-first post-order,
    iterative; a tuple on the stack marks a node whose arguments are done)."""
    order: list[Node] = []
    seen: set[Node] = set()
    stack: list = list(outputs)[::-1]
    mark, emit, push = seen.add, order.append, stack.append
    while stack:
        node = stack.pop()
        if node.__class__ is tuple:
            emit(node[0])
        elif node not in seen:
            mark(node)
            push((node,))
            for arg in reversed(node.args):
                if arg not in seen:
                    push(arg)
    return order


_SERIAL = operator.attrgetter("_serial")


def creation_order(outputs: Iterable[Node]) -> list[Node]:
    """Every node reachable from `outputs` in the order they were created, which is
    topological. Cheaper than `toposort` (no depth-first search: the reachable nodes, sorted),
    but it depends on the process's history, not only on the graph: for the engine's walk,
    whose result does not depend on the order, not for anything shown. The nodes are sorted in
    the reverse of the order they were found, which is mostly runs of creation order (a chain
    is found from its end): the sort merges runs instead of sorting a set's order."""
    seen = set(outputs)
    found = list(seen)
    stack = list(found)
    mark, push, pop, keep = seen.add, stack.append, stack.pop, found.append
    while stack:
        for arg in pop().args:
            if arg not in seen:
                mark(arg)
                push(arg)
                keep(arg)
    found.reverse()
    found.sort(key=_SERIAL)
    return found


def users_of(outputs: Iterable[Node]) -> dict[Node, list[Node]]:
    """For each reachable node, the nodes that use it (once per use)."""
    users: dict[Node, list[Node]] = {}
    for node in toposort(outputs):
        users.setdefault(node, [])
        for arg in node.args:
            users[arg].append(node)
    return users
