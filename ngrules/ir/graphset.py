"""A mutable set of nodes with designated outputs, for code that edits a graph step by step.

The nodes themselves stay immutable and hash-consed (see `graph`): editing rebuilds users.
"""

from __future__ import annotations

from collections.abc import Iterable

from ngrules.ir.graph import Node, format_graph, substitute, toposort, validate


class Graph:
    """A set of nodes with designated outputs: users, replacement, dead-node removal.

    Nodes stay immutable: `replace` rebuilds the users of the replaced node (once each) and
    moves the outputs to the rebuilt nodes. Nodes not reachable from the outputs are dead.
    """

    def __init__(self, outputs: Iterable[Node]):
        self.outputs: list[Node] = list(outputs)
        self._nodes: set[Node] = set(toposort(self.outputs))

    def __contains__(self, node: Node) -> bool:
        return node in self._nodes

    def __len__(self) -> int:
        return len(self._nodes)

    def nodes(self) -> list[Node]:
        """Live nodes in topological order, then any dead ones still held."""
        live = toposort(self.outputs)
        dead = self._nodes.difference(live)
        return live + [n for n in toposort(dead) if n in dead]

    def add(self, node: Node) -> Node:
        self._nodes.update(toposort([node]))
        return node

    def users(self, node: Node) -> list[Node]:
        return [n for n in self._nodes if node in n.args]

    def replace(self, old: Node, new: Node) -> None:
        """Redirect every user of `old` (and any output that is `old`) to `new`."""
        self.outputs = substitute(self.outputs, {old: new})
        self._nodes.update(toposort(self.outputs))

    def remove_dead(self) -> int:
        """Drop nodes not reachable from the outputs; returns how many were dropped."""
        live = set(toposort(self.outputs))
        dropped = len(self._nodes - live)
        self._nodes = live
        return dropped

    def validate(self) -> None:
        validate(self.outputs)

    def __str__(self) -> str:
        return format_graph(self.outputs)
