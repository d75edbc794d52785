"""A rule's result normalised where it stands: the part of a pass that is not the walk.

A rewrite's result may be new nodes on arguments not yet normalised, and its own normal form
may need further rewrites. `Normalizing._normalize` works them out on an explicit stack of
frames (no recursion on the depth of what a rule builds), with the pass's memo of normal forms
and its rules (`rules_for`, `_first_match`, supplied by the pass). A result that leads back
to a node still being normalised is a cycle of rules: `Cycle` names them, in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ngrules.engine.compiled import CompiledRule
    from ngrules.ir.graph import Node


class Cycle(Exception):
    """Rules whose results lead back to a node being normalised (in order)."""

    def __init__(self, rules: list[CompiledRule]):
        self.rules = rules


class Normalizing:
    """The normalisation of a rule's result, for a pass with `memo`, `rules_for` and
    `_first_match`."""

    memo: dict

    def _normalize(self, replacement: Node, rewritten: Node, rule: CompiledRule) -> Node:
        """The normal form of a rule's result, standing in for `rewritten`."""
        memo = self.memo
        frames = [[rewritten, rewritten, replacement, rule]]  # node, rebuilt, waiting-on, rule
        active = {rewritten: 0}
        if replacement not in memo:
            self._push(frames, active, replacement)
        while frames:
            frame = frames[-1]
            node, waiting = frame[0], frame[2]
            if waiting is not None:
                done = memo.get(waiting)
                if done is not None:
                    self._finish(frames, active, done)
                    continue
            pending = next((a for a in node.args if a not in memo), None)
            if pending is not None:
                self._push(frames, active, pending)
                continue
            rebuilt = node.with_args(tuple([memo[a] for a in node.args])) if node.args else node
            frame[1] = rebuilt
            done = memo.get(rebuilt)
            if done is not None:
                self._finish(frames, active, done)
                continue
            active.setdefault(rebuilt, len(frames) - 1)
            frame[3], found = self._first_match(rebuilt, self.rules_for(rebuilt.op))
            if frame[3] is None:
                self._finish(frames, active, rebuilt)
                continue
            replacement = found[1][0]
            done = memo.get(replacement)
            if done is not None:
                self._finish(frames, active, done)
                continue
            frame[2] = replacement
            self._push(frames, active, replacement)
        return memo[rewritten]

    def _push(self, frames, active, node: Node) -> None:
        start = active.get(node)
        if start is not None:
            raise Cycle([f[3] for f in frames[start:] if f[3] is not None])
        active[node] = len(frames)
        frames.append([node, None, None, None])

    def _finish(self, frames, active, result: Node) -> None:
        node, rebuilt = frames.pop()[:2]
        self.memo[node] = result
        if rebuilt is not None:
            self.memo[rebuilt] = result
            if active.get(rebuilt) == len(frames):
                del active[rebuilt]
        if active.get(node) == len(frames):
            del active[node]
