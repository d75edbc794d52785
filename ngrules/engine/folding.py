"""Constant folding: the built-in pass `fold_constants`, which any pipeline may name.

A node whose arguments all hold known values (constants, or views of constants) is evaluated
at rewrite time with its op's numpy kernel and replaced by a `Constant` of its axes and dtype.
So a rule may write `γ/√(σ² + ε)` or `w·s` over stored weights and the graph keeps one
constant, not a run-time computation.

Two bounds keep the graph from growing: the folded value has at most `limit` elements
(`DEFAULT_LIMIT`, or `rewrite(..., fold_limit=N)`, `--fold-limit N`), and no more elements
than its constant arguments hold together (a broadcast scalar stays a scalar). Views alone
(`Broadcast`, `ReorderAxes`, ...) are not folded: they cost nothing and their source is
smaller. Placeholders, variables (which feeds may change) and multi-output ops stay, and so
does a node over a symbolic length (`ir.symbolic`): its value would count the stand-in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ngrules.budget import DEFAULT_BUDGET, Meter
from ngrules.engine.spending import Spending
from ngrules.ir import symbolic
from ngrules.ir.filebytes import FileBytes
from ngrules.ir.folded import folded
from ngrules.ir.graph import Node, creation_order, make_node
from ngrules.ir.ops import get_op
from ngrules.ir.values import constant_source

#: The most elements one folded value may have, unless the caller says otherwise (2**24:
#: 64 MB of float32, more than any layer's weights of a ResNet-50).
DEFAULT_LIMIT = 1 << 24

#: The name pipelines use for this pass (reserved: no rules file may declare it).
PASS_NAME = "fold_constants"  # in lang.rules.BUILTIN_PASSES


class Folding:
    """One folding walk; `folded` lists (original node, constant) for each node folded. Each
    value computed is charged to `meter` (the rewrite's budget) before it is computed, and
    the time is checked before each. With `spend` (a model file's bytes that the caller reads
    no more, `engine.spending`), a value may be computed over the weight it is made from."""

    def __init__(self, limit: int | None = None, meter: Meter | None = None,
                 spend: FileBytes | None = None):
        self.limit = DEFAULT_LIMIT if limit is None else int(limit)
        self.meter = meter or Meter(DEFAULT_BUDGET, "rewrite")
        self.folded: list[tuple[Node, Node]] = []
        self._values: dict[Node, np.ndarray] = {}
        self._spend = spend
        self._spending: Spending | None = None
        self._memo: dict[Node, Node] = {}

    def apply(self, outputs: Sequence[Node]) -> list[Node]:
        """The outputs with every foldable node replaced by its constant."""
        memo: dict[Node, Node] = {}
        inputs: list[Node] = []
        order = creation_order(outputs)
        if self._spend is not None:
            self._spending, self._memo = Spending(self._spend, order, outputs), memo
        try:
            for node in order:
                if node.args:
                    rebuilt = node.with_args(tuple([memo[a] for a in node.args]))
                else:
                    rebuilt = node
                    if node.op == "Placeholder":
                        inputs.append(node)
                memo[node] = self._fold(rebuilt) if self._foldable(rebuilt) else rebuilt
        finally:
            if self._spending is not None:
                self._spending.finish()
            self._spending, self._memo = None, {}
        folded(inputs)  # records of the values folded at import: dropped (`ir.folded`)
        return [memo[o] for o in outputs]

    def fold(self, node: Node) -> Node | None:
        """The node's value as a Constant when it is foldable, else None (for saturation,
        which folds one term at a time)."""
        return self._fold(node) if self._foldable(node) else None

    def _foldable(self, node: Node) -> bool:
        if not node.args or node.outputs is not None:
            return False
        opdef = get_op(node.op)
        if opdef.has("view") or opdef.kernel is None:
            return False
        sources = []
        for a in node.args:  # most nodes read a computed value: asked one by one
            source = constant_source(a)
            if source is None:
                return False
            sources.append(source)
        if symbolic.STAND_INS and any(symbolic.symbols_of(a.axes.size) for a in node.args):
            return False  # its value would count a symbolic length's stand-in
        size = node.axes.size
        held = sum({id(s): s.axes.size for s in sources}.values())
        return size <= self.limit and size <= max(held, 1)

    def _fold(self, node: Node) -> Node:
        value = np.asarray(self._value(node)).astype(node.dtype, copy=False)
        value = value.reshape(node.axes.lengths)
        _freeze_fresh(value)
        folded = make_node("Constant", value=value, axes=node.axes)
        if self._spending is not None:
            self._spending.taken(folded)
        self.folded.append((node, folded))
        return folded

    def _value(self, node: Node) -> np.ndarray:
        """The node's value, evaluated through views down to its constants (over a spent
        weight when it can be, `engine.spending`)."""
        if node.op == "Constant":
            return node.attrs["value"]
        value = self._values.get(node)
        if value is None:
            what = f"folding a {node.op} of {node.axes.size} elements"
            self.meter.check_time(what)
            args = [self._value(a) for a in node.args]
            kernel, spending = get_op(node.op).kernel(node), self._spending
            value = None if spending is None else spending.fold(node, kernel, args, self._memo)
            if value is None:
                self.meter.charge(node.axes.size * np.dtype(node.dtype).itemsize, what)
                with np.errstate(all="ignore"):  # as at run time: inf and nan are values
                    value = kernel(*args)
            self._values[node] = value
        return value


def fold_constants(outputs: Sequence[Node], limit: int | None = None) -> list[Node]:
    """The graph of outputs with its constant subcomputations folded (see the module)."""
    return Folding(limit).apply(outputs)


def _freeze_fresh(value: np.ndarray) -> None:
    """Make a value a kernel computed here read-only, so the Constant holding it takes it as it
    is (`ops.frozen_array`) instead of copying it: a folded weight is not copied again."""
    root = value if value.base is None else value.base
    if isinstance(root, np.ndarray) and root.base is None and root.flags.owndata:
        root.setflags(write=False)
        value.setflags(write=False)
