"""ONNX ops that make tensors from shapes and constants (Range, ConstantOfShape, EyeLike,
Size: constants at import time, the shapes being static), and masks of them (Trilu, OneHot)."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.context import Context, converter
from ngrules.interop.onnx.shaping import Tensor, conform, fit
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes
from ngrules.ir.graph import make_node


def _constant(ctx: Context, value: np.ndarray) -> list:
    out = ctx.out_axes(0)
    value = np.asarray(value, dtype=ctx.out_dtype())
    return [Tensor(F.constant(value.reshape([a.length for a in out]), out, dtype=value.dtype),
                   out)]


@converter("Range")
def _range(ctx: Context):
    """start + delta * i for i < max(ceil((limit - start) / delta), 0), as ONNX defines it."""
    start, limit, delta = (ctx.need_const(i, "Range bound").item() for i in range(3))
    count = max(int(np.ceil((limit - start) / delta)), 0)
    return _constant(ctx, start + delta * np.arange(count))


@converter("ConstantOfShape")
def _constant_of_shape(ctx: Context):
    shape = [int(v) for v in np.ravel(ctx.need_const(0, "shape"))]
    value = ctx.attr("value")
    fill = np.ravel(_tensor_value(value))[0] if value is not None else 0.0
    return _constant(ctx, np.full(shape, fill))


def _tensor_value(proto) -> np.ndarray:
    from onnx import numpy_helper

    return numpy_helper.to_array(proto)


@converter("EyeLike")
def _eye_like(ctx: Context):
    rows, cols = ctx.x(0).shape
    return _constant(ctx, np.eye(rows, cols, int(ctx.attr("k", 0))))


@converter("Size")
def _size(ctx: Context):
    return _constant(ctx, np.prod(ctx.x(0).shape, dtype=np.int64))


@converter("Trilu")
def _trilu(ctx: Context):
    """x where a constant mask of its last two dimensions keeps it, else 0."""
    x = ctx.x(0)
    k = int(ctx.need_const(1, "diagonal offset").item()) if ctx.has(1) else 0
    rows, cols = x.shape[-2:]
    keep = np.triu if ctx.attr("upper", 1) else np.tril
    mask = keep(np.ones((rows, cols), bool), k)
    node = x.node
    cond = F.broadcast(F.constant(mask, x.axes[-2:], dtype=np.bool_), node.axes)
    zero = F.broadcast(F.constant(0, dtype=node.dtype), node.axes)
    return [Tensor(make_node("Select", (cond, node, zero)), x.axes)]


@converter("OneHot")
def _one_hot(ctx: Context):
    """off + (on - off) * OneHot(indices), indices below zero counted from the end."""
    out = ctx.out_axes(0)
    depth = int(ctx.need_const(1, "depth").item())
    off, on = (v.item() for v in np.ravel(ctx.need_const(2, "on/off values")))
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
    if (off, on) != (0, 1):
        hot = hot * F.constant(on - off, dtype=dtype) + F.constant(off, dtype=dtype)
    return [Tensor(fit(hot, Axes(out)), out)]
