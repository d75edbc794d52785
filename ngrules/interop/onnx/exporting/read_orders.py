"""Where a value that is sliced should be transposed: before its slices, once, when the
readers of two or more of its parts want them in one order.

Some readers fix the order they read an operand in: an ONNX op kept whole reads it in the
model's order, a positional writer in the operand's own, a graph output in its own. Slices,
concatenations, unary elementwise ops and views write in their operand's order, so what their
readers want is wanted of their operands too. A value read in one order by two or more readers
(through such ops) is sliced in that order: one Transpose before the slices, where slicing in
the value's order and transposing each part wrote one per part. Phi's partial rotary
embedding: the model moves the heads ahead of the sequence once, then slices the rotated part
from the rest and each half of it. A concatenation no reader wants in one order asks its
operands for the order those known before writing have (the rotated part, written by ONNX ops
kept whole, beside the part passed through).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ngrules.interop.onnx.exporting.writers.elementwise import BROADCASTING, ORDER_KEEPING
from ngrules.ir.graph import Node

#: Ops whose written value holds the dimensions of their (first) operand's, in its order.
_VIEWS = frozenset({"Broadcast", "ReorderAxes", "Transpose", "ExpandDims"})
SLICES = frozenset({"Slice", "TensorSlice"})

#: (node, the order its readers want it in or None) -> the (operand, order of its axes) it
#: asks for, or None where n's writer is a layout writer (`passed_on` answers).
Reads = Callable[[Node, "tuple | None"], "Iterable[tuple[Node, tuple]] | None"]
#: node -> the order its value has whatever its operands' (an ONNX op kept whole, a
#: positional writer), or None where that follows from its operands'.
Makes = Callable[[Node], "tuple | None"]


def slice_sources(order: Sequence[Node], outputs: Sequence[Node], reads: Reads,
                  makes: Makes) -> dict:
    """Slice node -> the order of its operand's axes to slice it in, for the slices whose
    operand two or more readers want in the order this slice's readers want it in."""
    made = written_orders(order, makes)
    wanted: dict[Node, tuple | None] = {}  # None: readers disagree
    count: dict[Node, int] = {}

    def ask(node: Node, axes: tuple) -> None:
        if _long(axes) is None or set(_long(axes)) != set(_long(node.axes)):
            return
        if node in wanted and (wanted[node] is None or _long(wanted[node]) != _long(axes)):
            wanted[node] = None
            return
        wanted.setdefault(node, axes)
        count[node] = count.get(node, 0) + 1

    for out in outputs:
        ask(out, tuple(out.axes))
    for n in reversed(order):
        want = wanted.get(n)
        if want is None and n.op == "Concat":
            want = made.get(n)  # the order the operands known already have: the others too
        asks = reads(n, want)
        if asks is None:
            asks = [] if want is None else passed_on(n, want)
        for arg, axes in asks:
            ask(arg, tuple(axes))
    sources = {}
    for n in order:
        if n.op in SLICES and wanted.get(n) is not None:
            for x, axes in passed_on(n, wanted[n]):
                if wanted.get(x) is not None and count[x] >= 2 and (
                        _long(axes) == _long(wanted[x])):
                    sources[n] = axes
    return sources


def written_orders(order: Sequence[Node], makes: Makes) -> dict:
    """Node -> the order of the dimensions its value will have, where that is known before
    writing: fixed by the node (`makes`), or kept from its operand by a view or a unary op,
    or from those known of a concatenation or a binary op where they agree (not a slice's:
    that is the order being chosen)."""
    made: dict[Node, tuple] = {}
    for n in order:
        axes = makes(n)
        if axes is None:
            axes = _kept(n, made)
        if axes is not None and _long(axes) is not None:
            made[n] = tuple(axes)
    return made


def _kept(n: Node, made: dict) -> tuple | None:
    if n.op == "Concat" or n.op in BROADCASTING:
        if n.op == "Concat":
            known = [_onto(n, i, made[a]) for i, a in enumerate(n.args) if a in made]
        else:  # the operands holding every axis of the result decide its order
            known = [made[a] for a in n.args
                     if a in made and set(_long(a.axes)) == set(_long(n.axes))]
        orders = {_long(k) for k in known}
        return known[0] if len(orders) == 1 else None
    back = _axis_map(n, 0)
    if back is None or n.op in SLICES or n.args[0] not in made:
        return None  # a slice's order is what is being chosen
    ahead = {b: a for a, b in back.items()}
    return tuple(ahead[a] for a in made[n.args[0]] if a in ahead)


def passed_on(n: Node, axes: tuple) -> list[tuple[Node, tuple]]:
    """The orders n's operands are wanted in when n is wanted in `axes` (n's axes), for ops
    that write in their operand's order; [] for the others."""
    asks = []
    for i, arg in enumerate(n.args):
        back = _axis_map(n, i)
        if back is not None:
            asks.append((arg, tuple(back[a] for a in axes if a in back)))
    return asks


def _axis_map(n: Node, i: int) -> dict | None:
    """n's axis -> the axis of operand i it holds, for ops written in operand i's order of
    dimensions (views, unary ops, slices, each operand of a concatenation); else None."""
    x = n.args[i]
    if n.op in _VIEWS or n.op in ORDER_KEEPING:
        return {a: a for a in n.axes if a in x.axes} if i == 0 else None
    if n.op == "AxesCast":
        return dict(zip(n.axes, x.axes))
    if n.op == "Slice":
        at = n.attrs
        return {a: (x.axes[at["position"]] if a == at["axis"] else a) for a in n.axes}
    if n.op == "Concat":
        pos, axis = n.attrs["position"], n.attrs["axis"]
        return {a: (x.axes[pos] if a == axis else a) for a in n.axes}
    if n.op == "TensorSlice":
        rows = np.asarray(n.attrs["slices"]).tolist()
        if any(r[2] == 0 for r in rows) or len(x.axes) != len(n.axes):
            return None  # an indexed axis dropped: no order of x's axes to give
        return dict(zip(n.axes, x.axes))
    return None


def _onto(n: Node, i: int, axes: tuple) -> tuple:
    """An order of operand i's axes as the order of n's (the inverse of `_axis_map`)."""
    ahead = {b: a for a, b in _axis_map(n, i).items()}
    return tuple(ahead[a] for a in axes if a in ahead)


def same_order(a, b) -> bool:
    """Whether two orders move the same dimensions the same way (units aside)."""
    return _long(a) == _long(b)


def _long(axes) -> tuple | None:
    """The axes longer than 1, in order (the ones a Transpose moves); None if one repeats."""
    long = tuple(a for a in axes if a.length > 1)
    return long if len(set(long)) == len(long) else None
