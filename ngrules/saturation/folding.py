"""The built-in pass `fold_constants` as an e-graph rule: a term whose arguments hold known
values gets its value as a `Constant` in its class (the engine's `Folding`, same bounds).

It plays a rule's part for `matching.Searcher`: `apply(term)` gives what `CompiledRule.apply`
gives, `shape` what its views read (any e-node over its arguments' known values, perhaps under
views: see `matching.Shape`).
"""

from __future__ import annotations

from ngrules.budget import BudgetExceeded, Meter
from ngrules.engine.folding import PASS_NAME, Folding
from ngrules.errors import NgrulesError
from ngrules.ir.graph import Node


class FoldRule:
    """Constant folding at one term; `name` and `rule` are the pass's name (its provenance)."""

    root_ops = None

    def __init__(self, shape, limit: int | None = None, meter: Meter | None = None):
        self.name = self.rule = PASS_NAME
        self.shape = shape
        self._folding = Folding(limit, meter)

    def apply(self, term: Node):
        if term.op == "Constant":
            return None
        try:
            folded = self._folding.fold(term)
        except BudgetExceeded:
            raise  # the saturation's budget, not this value, is spent
        except (NgrulesError, ValueError, TypeError, ArithmeticError):
            return None  # a kernel that cannot fold this value: the term stays as it is
        return None if folded is None else ((term,), (folded,), ())
