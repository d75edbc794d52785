"""ONNX ops that make tensors from shapes and constants (Range, ConstantOfShape, EyeLike,
Size: constants at import time, the shapes being static), and masks of them (Trilu, OneHot).
A Range or ConstantOfShape whose length is symbolic (a stand-in, `ir.symbolic`) is never a
constant: positions along the graph input's axis of that length (`AxisIndex`), a broadcast."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx import ndarrays
from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.shape import cut
from ngrules.interop.onnx.importing.shaping import Tensor, conform, fit, squeeze, temp_axis
from ngrules.ir import builders as F
from ngrules.ir import symbolic
from ngrules.ir.axes import Axes, Axis
from ngrules.ir.graph import Node, make_node


def _constant(ctx: Context, value: np.ndarray) -> list:
    value = np.asarray(value, dtype=ctx.out_dtype())
    if value.size == 0:
        raise ctx.unsupported(f"a result with a dimension of length 0 {value.shape}")
    out = ctx.out_axes(0)
    return [Tensor(F.constant(value.reshape([a.length for a in out]), out, dtype=value.dtype),
                   out)]


@converter("Range")
def _range(ctx: Context):
    """start + delta * i for i < max(ceil((limit - start) / delta), 0), as ONNX defines it."""
    start, limit, delta = (ctx.need_const(i, "Range bound").item() for i in range(3))
    count = max(int(np.ceil((limit - start) / delta)), 0)
    if symbolic.symbols_of(count):
        return [_symbolic_range(ctx, count, start, delta)]
    if any(n in ctx.importer.folding.symbolic for n in ctx.node.input):
        raise ctx.unsupported(f"a Range of {count} computed from a symbolic length other than "
                              "one of the inputs' (give the lengths with --length)")
    return _constant(ctx, start + delta * np.arange(count))


def _input_axis(ctx: Context, length: int) -> tuple[Node, Axis]:
    """A graph input and its axis of this (stand-in) length."""
    for node in ctx.importer.placeholders.values():
        for axis in node.axes:
            if axis.length == length:
                return node, axis
    symbols = " * ".join(symbolic.symbols_of(length))
    raise ctx.unsupported(f"a length computed from the symbolic {symbols} that no input has "
                          f"(give it with --length)")


def _symbolic_range(ctx: Context, count: int, start, delta) -> Tensor:
    """start + delta * i along the symbolic axis, computed at run time."""
    x, axis = _input_axis(ctx, count)
    dtype = ctx.out_dtype()
    node = F.axis_index(x, axis)
    if dtype != np.int64:
        node = F.cast(node, dtype)
    if delta != 1:
        node = node * F.constant(delta, dtype=dtype)
    if start != 0:
        node = node + F.constant(start, dtype=dtype)
    return Tensor(node, (axis,))


@converter("ConstantOfShape")
def _constant_of_shape(ctx: Context):
    shape = [int(v) for v in np.ravel(ctx.need_const(0, "shape"))]
    value = ctx.attr("value")
    fill = np.ravel(_tensor_value(value))[0] if value is not None else 0.0
    if symbolic.symbols_of(tuple(shape)):  # a broadcast scalar: nothing allocated
        out = ctx.out_axes(0)
        scalar = F.constant(np.asarray(fill, dtype=ctx.out_dtype()))
        return [Tensor(F.broadcast(scalar, Axes(out)), out)]
    return _constant(ctx, np.full(shape, fill))


def _tensor_value(proto) -> np.ndarray:
    return ndarrays.to_array(proto)


@converter("EyeLike")
def _eye_like(ctx: Context):
    rows, cols = ctx.x(0).shape
    return _constant(ctx, np.eye(rows, cols, int(ctx.attr("k", 0))))


@converter("Size")
def _size(ctx: Context):
    return _constant(ctx, np.prod(ctx.x(0).shape, dtype=np.int64))


@converter("Trilu")
def _trilu(ctx: Context):
    """x where its last two dimensions' column - row is >= k (upper; <= k lower), else 0:
    a constant mask, or with k computed at run time a comparison with it."""
    x = ctx.x(0)
    rows, cols = x.shape[-2:]
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    upper = ctx.attr("upper", 1)
    node = x.node
    k = ctx.const(1) if ctx.has(1) else np.zeros((), np.int64)
    if k is not None:
        mask = offset >= int(k) if upper else offset <= int(k)
        cond = F.constant(mask, x.axes[-2:], dtype=np.bool_)
    else:
        k_node = F.cast(squeeze(ctx.x(1).node, list(ctx.x(1).node.axes)), np.int64)
        diagonal = F.constant(offset, x.axes[-2:], dtype=np.int64)
        cond = F.greater_equal(diagonal, k_node) if upper else F.less_equal(diagonal, k_node)
    zero = F.broadcast(F.constant(0, dtype=node.dtype), node.axes)
    return [Tensor(make_node("Select", (F.broadcast(cond, node.axes), node, zero)), x.axes)]


@converter("OneHot")
def _one_hot(ctx: Context):
    """off + (on - off) * OneHot(indices), indices below zero counted from the end."""
    out = ctx.out_axes(0)
    depth = int(ctx.need_const(1, "depth").item())
    pos = ctx.attr("axis", -1) % len(out)
    indices = ctx.x(0)
    index = conform(indices, out[:pos] + out[pos + 1 :]).node
    if index.dtype.kind == "f":
        index = F.cast(F.floor(index), np.int64)
    index = F.cast(index, np.int64)
    index = F.where(F.less(index, F.constant(0, dtype=np.int64)),
                    index + F.constant(depth, dtype=np.int64), index)
    dtype = ctx.out_dtype()
    hot = make_node("OneHot", (index,), axis=out[pos], dtype=dtype)
    values = ctx.const(2)
    if values is None:  # computed at run time: off + (on - off) * hot
        off, on = (_element(ctx.x(2), i) for i in (0, 1))
        hot = hot * (on - off) + off
    elif tuple(np.ravel(values)) != (0, 1):
        off, on = (v.item() for v in np.ravel(values))
        hot = hot * F.constant(on - off, dtype=dtype) + F.constant(off, dtype=dtype)
    return [Tensor(fit(hot, Axes(out)), out)]


def _element(t: Tensor, i: int) -> Node:
    """Element i of a 1-D tensor, as a scalar node."""
    part = cut(t, 0, i, i + 1, temp_axis(1))
    return squeeze(part.node, list(part.node.axes))
