"""An e-graph over the IR: equal terms kept together, none destroyed.

An e-node is an op with its attributes over argument *classes*; e-nodes are hash-consed by
`(op, argument classes, attributes' key)`, classes are joined in a union-find, and `rebuild`
restores congruence (two e-nodes with the same op and attributes over the same classes are one
class). Each class keeps a witness: a concrete `Node` of the IR equal to every term of the
class (the first term that made it). Rules match concrete terms (`views`), so the engine's
generated matchers, guards and lets run unchanged on the e-graph.
"""

from __future__ import annotations

from collections.abc import Iterable

from ngrules.ir.graph import Node


class ENode:
    """An op and its attributes (`template`, a term with them) over argument classes; `rule`
    names the rule whose replacement first built it (None: it came from the input graph)."""

    __slots__ = ("template", "args", "rule", "cls", "cost", "serial")

    def __init__(self, template: Node, args: tuple[int, ...], rule: str | None, cls: int):
        self.template, self.args, self.rule, self.cls = template, args, rule, cls
        self.cost: float | None = None  # extraction's cost of the node, computed once
        self.serial = 0  # the order of creation (`EGraph.created` when it was made)

    @property
    def op(self) -> str:
        return self.template.op

    def key(self) -> tuple:
        return (self.template.op, self.args, self.template._key[2])


class EGraph:
    """Classes of equal terms. `add` enters a term (a `Node` and everything under it), `union`
    records an equality, `rebuild` restores congruence and regroups the e-nodes by class."""

    def __init__(self) -> None:
        self.parent: list[int] = []
        self.enodes: list[ENode] = []
        self.memo: dict[tuple, int] = {}  # e-node key -> class (canonical after `rebuild`)
        self.classes: dict[int, list[ENode]] = {}  # canonical class -> its e-nodes
        self.witness: dict[int, Node] = {}
        self.of_term: dict[Node, int] = {}  # a term -> its class (may be stale: use `find`)
        self.unions = 0
        self.created = 0  # e-nodes ever created (duplicates dropped by `rebuild` included)
        #: classes that gained an e-node or were joined since `take_touched` (see `affected`)
        self.touched: set[int] = set()
        #: (rule, class matched, class of what it built, `created` after it) for each match
        #: that changed the e-graph, in order (for explanations)
        self.history: list[tuple[object, int, int, int]] = []

    def __len__(self) -> int:
        """The number of e-nodes."""
        return len(self.enodes)

    def find(self, c: int) -> int:
        parent = self.parent
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    def class_of(self, node: Node) -> int | None:
        c = self.of_term.get(node)
        return None if c is None else self.find(c)

    def add(self, node: Node, rule: str | None = None) -> int:
        """The class of the term `node`, entering it and the terms under it as needed; new
        e-nodes record `rule` as the one that built them."""
        of_term = self.of_term
        if node in of_term:
            return self.find(of_term[node])
        stack: list[tuple[Node, bool]] = [(node, False)]
        while stack:
            n, ready = stack.pop()
            if n in of_term:
                continue
            if not ready:
                stack.append((n, True))
                stack.extend((a, False) for a in n.args if a not in of_term)
                continue
            args = tuple(self.find(of_term[a]) for a in n.args)
            of_term[n] = self._enode(n, args, rule)
        return self.find(of_term[node])

    def _enode(self, template: Node, args: tuple[int, ...], rule: str | None) -> int:
        key = (template.op, args, template._key[2])
        found = self.memo.get(key)
        if found is not None:
            return self.find(found)
        c = len(self.parent)
        self.parent.append(c)
        enode = ENode(template, args, rule, c)
        self.enodes.append(enode)
        self.created += 1
        enode.serial = self.created
        self.classes[c] = [enode]
        self.witness[c] = template
        self.touched.add(c)
        self.memo[key] = c
        return c

    def note_term(self, term: Node, c: int) -> None:
        """`term` (built from e-nodes of class c) is a term of c; a term already known in
        another class makes the two classes one."""
        known = self.of_term.get(term)
        if known is None:
            self.of_term[term] = c
        else:
            self.union(known, c)

    def union(self, a: int, b: int) -> bool:
        """Record a == b; whether they were different classes. The older class stays the
        representative; its witness is the older one's, unless the other is a constant (then
        rules see the class's known value wherever they look at its witness)."""
        a, b = self.find(a), self.find(b)
        if a == b:
            return False
        if b < a:
            a, b = b, a
        self.parent[b] = a
        self.touched.add(a)
        self.classes[a].extend(self.classes.pop(b))
        other = self.witness.pop(b)
        if other.op == "Constant" and self.witness[a].op != "Constant":
            self.witness[a] = other
        self.unions += 1
        return True

    def rebuild(self) -> None:
        """Restore congruence to a fixpoint, then drop duplicate e-nodes (the first built
        stays, with its provenance)."""
        while True:
            memo: dict[tuple, int] = {}
            merged = False
            for enode in self.enodes:
                enode.args = tuple(self.find(a) for a in enode.args)
                key = enode.key()
                c = self.find(enode.cls)
                other = memo.get(key)
                if other is None:
                    memo[key] = c
                elif self.union(other, c):
                    merged = True
            if not merged:
                break
        kept, classes = [], {}
        seen: set[tuple] = set()
        for enode in self.enodes:
            key = enode.key()
            if key in seen:
                continue
            seen.add(key)
            enode.cls = self.find(enode.cls)
            kept.append(enode)
            classes.setdefault(enode.cls, []).append(enode)
        self.enodes, self.classes = kept, classes
        self.memo = {e.key(): e.cls for e in kept}

    def affected(self, depth: int) -> set[int]:
        """The classes touched since the last call and those up to `depth` levels above them
        (whose e-nodes read them as arguments): where a match may be new. Clears `touched`."""
        level = {self.find(c) for c in self.touched}
        self.touched = set()
        users: dict[int, set[int]] = {}
        for enode in self.enodes:
            for a in enode.args:
                users.setdefault(a, set()).add(enode.cls)
        found = set(level)
        for _ in range(depth):
            level = {u for c in level for u in users.get(c, ())} - found
            found |= level
        return found

    def reachable(self, roots: Iterable[int]) -> list[int]:
        """The classes under the root classes (canonical ids, each once)."""
        seen: set[int] = set()
        stack = [self.find(r) for r in roots]
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            stack.extend(a for e in self.classes[c] for a in e.args if a not in seen)
        return sorted(seen)
