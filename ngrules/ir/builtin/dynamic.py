"""Slices at a start known only when the graph runs: DynamicSlice and DynamicUpdateSlice (XLA's
ops of those names, one axis each, as ngrules' Slice).

The start is a scalar integer tensor. As in XLA, it is clamped so that the window fits the
axis: a kernel never reads or writes out of range, whatever the data. The window's length is
static: the result axis's length (DynamicSlice) or the update's length there.
"""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import opgen as G
from ngrules.ir.axes import Axes, Axis
from ngrules.ir.graph import make_node
from ngrules.ir.ops import AttrSpec, register_op

_POSITION = AttrSpec("position", "int", doc="the position of the sliced axis")


def clamped_start(start, n: int, length: int) -> int:
    """XLA's start: clamped into [0, n - length] so the window fits an axis of length n."""
    return int(min(max(int(np.asarray(start)), 0), n - length))


def _check_start(op: str, x, start, position: int) -> None:
    if start.axes or start.dtype.kind not in "iu":
        raise OpError(f"{op}: the start must be a scalar integer, got {start.dtype} "
                      f"with axes {start.axes!r}")
    if not 0 <= position < len(x.axes):
        raise OpError(f"{op}: position {position} is not an axis of {x.axes!r}")


def _gen(op: str):
    """DynamicSlice or DynamicUpdateSlice along one axis, from a start that may be out of
    range (the ops clamp it)."""

    def gen(draw, leaf):
        from hypothesis import strategies as st

        pool = G.axis_pool(draw)
        axes = G.some_axes(draw, pool[1:], min_size=1)
        pos = draw(st.integers(0, len(axes) - 1))
        part = Axis(pool[0].name, draw(st.integers(1, axes[pos].length)))
        start = make_node("Constant", value=np.array(draw(st.integers(-1, 3)), np.int64),
                          axes=Axes(()))
        if op == "DynamicSlice":
            return make_node(op, (leaf(axes), start), position=pos, axis=part)
        update = leaf(axes[:pos] + Axes((part,)) + axes[pos + 1 :])
        return make_node(op, (leaf(axes), update, start), position=pos)

    return gen


def _slice_infer(args, attrs):
    (x, start), pos, axis = args, attrs["position"], attrs["axis"]
    _check_start("DynamicSlice", x, start, pos)
    if axis.length > x.axes[pos].length:
        raise OpError(f"DynamicSlice: {axis!r} is longer than the sliced {x.axes[pos]!r}")
    return x.axes[:pos] + Axes((axis,)) + x.axes[pos + 1 :], x.dtype


def _slice_kernel(node):
    pos, length = node.attrs["position"], node.attrs["axis"].length
    n = node.args[0].axes[pos].length

    def run(a, start):
        s = clamped_start(start, n, length)
        return a[(slice(None),) * pos + (slice(s, s + length),)]

    return run


def _slice_grad(node, d):
    x, start = node.args
    zeros = make_node("Constant", value=np.zeros(x.axes.lengths, d.dtype), axes=x.axes)
    pos = node.attrs["position"]
    return make_node("DynamicUpdateSlice", (zeros, d, start), position=pos), None


register_op(
    "DynamicSlice",
    arity=2,
    attrs=(_POSITION, AttrSpec("axis", "axis", doc="the result axis; its length is the window's")),
    infer=_slice_infer,
    kernel=_slice_kernel,
    grad=_slice_grad,
    gen=_gen("DynamicSlice"),
    doc="the window of `axis`'s length from `start` (clamped to fit) along the axis at "
        "`position`, which becomes `axis`",
)


def _update_infer(args, attrs):
    (x, update, start), pos = args, attrs["position"]
    _check_start("DynamicUpdateSlice", x, start, pos)
    same = len(update.axes) == len(x.axes) and all(
        u == a for i, (u, a) in enumerate(zip(update.axes, x.axes)) if i != pos)
    if not same or update.axes[pos].length > x.axes[pos].length:
        raise OpError(f"DynamicUpdateSlice: the update's axes {update.axes!r} must be x's "
                      f"{x.axes!r} but at position {pos}, no longer there")
    if update.dtype != x.dtype:
        raise OpError(f"DynamicUpdateSlice: the update is {update.dtype}, x is {x.dtype}")
    return x.axes, x.dtype


def _update_kernel(node):
    pos = node.attrs["position"]
    n, length = node.args[0].axes[pos].length, node.args[1].axes[pos].length

    def run(a, u, start):
        s = clamped_start(start, n, length)
        out = np.array(a, copy=True)
        out[(slice(None),) * pos + (slice(s, s + length),)] = u
        return out

    return run


def _update_grad(node, d):
    """x's adjoint: d with the window zeroed; the update's: d's window."""
    x, update, start = node.args
    pos = node.attrs["position"]
    zeros = make_node("Constant", value=np.zeros(update.axes.lengths, d.dtype), axes=update.axes)
    return (make_node("DynamicUpdateSlice", (d, zeros, start), position=pos),
            make_node("DynamicSlice", (d, start), position=pos, axis=update.axes[pos]), None)


register_op(
    "DynamicUpdateSlice",
    arity=3,
    attrs=(_POSITION,),
    infer=_update_infer,
    kernel=_update_kernel,
    grad=_update_grad,
    gen=_gen("DynamicUpdateSlice"),
    doc="x with `update` written from `start` (clamped to fit) along the axis at `position`",
)
