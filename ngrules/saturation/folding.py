"""The built-in pass `fold_constants` as an e-graph rule: a term whose arguments hold known
values gets its value as a `Constant` in its class (the engine's `Folding`, same bounds).

It plays a rule's part for `matching.Searcher`: `apply(term)` gives what `CompiledRule.apply`
gives, `depth` how deep its views go (2: an argument class's constant, perhaps under a view).
"""

from __future__ import annotations

from ngrules.engine.folding import PASS_NAME, Folding
from ngrules.errors import NgrulesError
from ngrules.ir.graph import Node


class FoldRule:
    """Constant folding at one term; `name` and `rule` are the pass's name (its provenance)."""

    root_ops = None
    depth = 2

    def __init__(self, limit: int | None = None):
        self.name = self.rule = PASS_NAME
        self._folding = Folding(limit)

    def apply(self, term: Node):
        if term.op == "Constant":
            return None
        try:
            folded = self._folding.fold(term)
        except (NgrulesError, ValueError, TypeError, ArithmeticError):
            return None  # a kernel that cannot fold this value: the term stays as it is
        return None if folded is None else ((term,), (folded,), ())
