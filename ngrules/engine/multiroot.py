"""Multi-root rules: every non-overlapping match of a round found in one walk, applied at once.

A multi-root rule needs the users of the nodes it binds, so it runs on a settled graph, between
the walks of single-root rules. One round builds one users index and walks the graph once in
topological order, trying the pass's multi-root rules at each node. A match is taken unless it
overlaps one taken before: none of its roots may be a root or a bound node of a taken match,
and none of its bound nodes a taken root (both would then rewrite the same node, or one would
read a node the other replaces). Backtracking finds another way to match when one overlaps.

All taken matches are then applied together: each root is replaced by its replacement, and a
replacement that holds another match's root sees that root replaced too, as if the matches had
been applied one after another. A replacement that holds one of its own roots keeps it as it
is (as applying that match alone would). A round costs time linear in the graph, so a network
of many layers, one match each, is rewritten in a few rounds rather than one round per layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ngrules.ir.graph import Node, users_of


class Context:
    """One round's view of the settled graph: order, users, and the matches taken so far."""

    def __init__(self, outputs: Sequence[Node]):
        self.users = users_of(outputs)
        self.order = list(self.users)  # users_of enters the nodes in topological order
        self._every: list[Node] | None = None
        self.roots: set[Node] = set()  # roots of the matches taken
        self.claimed: set[Node] = set()  # their roots and bound nodes

    def candidates(self, anchor, bindings) -> Iterable[Node]:
        """Nodes that could be a further root: users (to the anchor's depth) of a bound node,
        or with no anchor every node, by op name then in topological order."""
        if anchor is None:
            if self._every is None:
                by_op: dict[str, list[Node]] = {}
                for node in self.order:
                    by_op.setdefault(node.op, []).append(node)
                self._every = [n for op in sorted(by_op) for n in by_op[op]]
            return self._every
        name, depth = anchor
        level = [bindings[name]]
        for _ in range(depth):
            seen: dict[Node, None] = {}
            for node in level:
                for user in self.users.get(node, ()):
                    seen[user] = None
            level = list(seen)
        return level

    def free(self, roots: tuple[Node, ...], bindings: Mapping[str, Node]) -> bool:
        """Does this match overlap none taken so far?"""
        claimed, taken = self.claimed, self.roots
        if any(r in claimed for r in roots):
            return False
        return not any(v in taken for v in bindings.values())

    def take(self, roots: tuple[Node, ...], bindings: Mapping[str, Node]) -> None:
        self.roots.update(roots)
        self.claimed.update(roots)
        self.claimed.update(bindings.values())


def apply_together(outputs: Sequence[Node], mapping: Mapping[Node, Node]) -> list[Node]:
    """The outputs with every root in `mapping` replaced by its replacement, the replacements
    themselves seeing the other roots replaced (iterative: no recursion on graph depth).

    A root met again while its own replacement is being resolved (a replacement holding its
    own root, directly or through another match's) is kept as it is.
    """
    memo: dict[Node, Node] = {}
    active: set[Node] = set()  # on the current path: expanded, not yet resolved
    for out in outputs:
        stack = [out]
        while stack:
            node = stack[-1]
            if node in memo:
                stack.pop()
                continue
            target = mapping.get(node)
            if target is node:
                target = None
            below = node.args if target is None else (target,)
            if node not in active:
                active.add(node)
                pending = [k for k in below if k not in memo and k not in active]
                if pending:
                    stack.extend(pending)
                    continue
            stack.pop()
            active.discard(node)
            if target is not None:
                memo[node] = memo.get(target, target)
            elif below:
                memo[node] = node.with_args(tuple([memo.get(a, a) for a in below]))
            else:
                memo[node] = node
    return [memo[o] for o in outputs]
