"""Nodes a pass has not rebuilt yet: what lets a rewrite skip the nodes it fuses away.

When a node's arguments were rewritten, the walk does not rebuild it at once: it records the
node as *pending* with the normal forms of its arguments (its view), and the matchers read a
pending node's arguments through that view, so they see exactly the rebuilt node without it
being built. A pending node is rebuilt (`force`) only when something needs the node itself: a
rule's replacement or a guard that reads more than its type, an identity test that a pending
node takes part in, a user that is built, or an output of the pass. So a subgraph that a rule
fuses into one op is matched and replaced without its inner nodes ever being rebuilt. (A
`=> x` rule firing at a node not built returns a pending x as it is: x then stands for the
node, and is built only if something needs it.)
"""

from __future__ import annotations

from ngrules.ir.graph import Node, rebuilt_on, register


class Pending(dict):
    """Pending node -> the images of its arguments (each a normal form or a pending node).

    `memo` is the pass's map from nodes to normal forms: a pending node maps to itself until
    it is forced, then to its rebuilt node; a pending node whose op is in `bare` (no rule can
    rewrite it) is not in the memo until it is forced. Entries stay after forcing (a matcher
    may still read a pending node's view); `force` returns the rebuilt node again.
    """

    def __init__(self, memo: dict[Node, Node]):
        super().__init__()
        self.memo = memo
        self.bare: frozenset[str] = frozenset()

    def force(self, node: Node) -> Node:
        """node's normal form, rebuilding it (and what it needs) if pending (no recursion). A
        node being matched is not in the memo yet: it is rebuilt like one not yet forced."""
        if node not in self:
            return node
        memo = self.memo
        done = memo.get(node, node)
        if done is not node:
            return done
        for a in self[node]:
            if a in self and memo.get(a, a) is a:
                break
        else:  # its arguments are normal forms already: one node to build
            return self._force_one(node)
        stack = [node]
        while stack:
            top = stack[-1]
            waiting = [a for a in self[top] if a in self and memo.get(a, a) is a]
            if waiting:
                stack.extend(waiting)
                continue
            stack.pop()
            if memo.get(top, top) is top:
                self._force_one(top)
        return memo[node]

    def _force_one(self, node: Node) -> Node:
        """Rebuild node (its arguments are settled) and make that its normal form."""
        memo = self.memo
        # no rule matched it (or none can): what it rebuilds to is a normal form
        judged = node in memo or node.op in self.bare
        memo[node] = rebuilt = self._built(node)
        if judged:
            memo.setdefault(rebuilt, rebuilt)
        return rebuilt

    def rebuild(self, node: Node) -> Node:
        """The pending node itself, built on its arguments' normal forms (hash-consed)."""
        return self.rebuild_on(node, self[node])

    def rebuild_on(self, node: Node, view: tuple[Node, ...]) -> Node:
        """node built on the normal forms of `view` (its arguments' images, pending or not)."""
        for a in view:
            self.force(a)
        return self._built(node, view)

    def _built(self, node: Node, view: tuple[Node, ...] | None = None) -> Node:
        memo = self.memo  # its pending arguments are forced
        view = self[node] if view is None else view
        args = tuple([memo.get(a, a) if a in self else a for a in view])
        rebuilt, fresh = rebuilt_on(node, args)
        return register(rebuilt) if fresh else rebuilt


#: The view of a pass with nothing pending (matchers used outside a walk).
NONE_PENDING = Pending({})


def same_node(a: Node, b: Node, pending: Pending) -> bool:
    """Whether a and b (not the same object) are one node once rebuilt."""
    if not pending or (a not in pending and b not in pending):
        return False
    return pending.force(a) is pending.force(b)
