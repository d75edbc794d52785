"""ONNX's linear quantization from primitives: QuantizeLinear (x / scale rounded half to even,
plus the zero point, clipped to the integer type), DequantizeLinear ((x - zero point) *
scale), DynamicQuantizeLinear (scale and zero point from x's range), MatMulInteger and
QLinearMatMul (the integer product of the shifted operands, requantized). Scales and zero
points are one value, one per slice along `axis`, or one per block of `block_size` there.
The 8-, 4- and 2-bit float and integer types have no ngrules tensor and are refused by name."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx import ndarrays
from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.arithmetic import matmul
from ngrules.interop.onnx.importing.converters.padmodes import gather_positions
from ngrules.interop.onnx.importing.shaping import Tensor, broadcast_to, conform, fit, squeeze
from ngrules.ir import builders as F
from ngrules.ir.graph import Node, make_node

_INT32 = np.dtype(np.int32)


def _spread(ctx: Context, i: int, x: Tensor, dtype) -> Node:
    """Input i (a scale or zero point) as `dtype`, spread over x's axes."""
    t = ctx.x(i)
    if int(np.prod(t.shape)) == 1:
        node = squeeze(t.node, list(t.node.axes))
    else:
        pos = ctx.attr("axis", 1) % len(x.axes)
        block = ctx.attr("block_size", 0)
        if block:  # one value per block along the axis: each repeated over its block
            t = gather_positions(t, pos, np.arange(x.shape[pos]) // block)
            node = conform(t, x.axes).node
        else:
            node = conform(t, (x.axes[pos],)).node
    return fit(F.cast(node, dtype), x.node.axes)


def _clipped(value: Node, dtype: np.dtype) -> Node:
    """value (a float of whole numbers) clipped to the range of the integer dtype, cast."""
    info = np.iinfo(dtype)
    low = F.constant(info.min, dtype=value.dtype)
    high = F.constant(info.max, dtype=value.dtype)
    return F.cast(F.minimum(F.maximum(value, low), high), dtype)


def _round(x: Node) -> Node:
    return make_node("Round", (x,))


@converter("QuantizeLinear")
def _quantize(ctx: Context):
    x, dtype = ctx.x(0), ctx.out_dtype()
    if dtype.kind not in "iu":
        raise ctx.unsupported(f"quantizing to {dtype}")
    work = x.node.dtype
    precision = ctx.attr("precision", 0)
    if precision:
        work = np.dtype(ndarrays.tensor_dtype_to_np_dtype(precision))
    steps = _round(F.cast(x.node, work) / _spread(ctx, 1, x, work))
    value = F.cast(steps, np.float64)
    if ctx.has(2):
        value = value + _spread(ctx, 2, x, np.float64)
    return [Tensor(_clipped(value, dtype), x.axes)]


@converter("DequantizeLinear")
def _dequantize(ctx: Context):
    x = ctx.x(0)
    if x.node.dtype.kind not in "iu":
        raise ctx.unsupported(f"dequantizing {x.node.dtype}")
    work = np.dtype(np.float64 if x.node.dtype.itemsize > 2 else np.float32)
    value = F.cast(x.node, work)
    if ctx.has(2):
        value = value - _spread(ctx, 2, x, work)
    value = value * _spread(ctx, 1, x, work)
    return [Tensor(F.cast(value, ctx.out_dtype()), x.axes)]


@converter("DynamicQuantizeLinear")
def _dynamic_quantize(ctx: Context):
    """scale = (max(x, 0) - min(x, 0)) / 255 (1 / 255 when both are 0); zero point =
    -min / scale rounded and clipped to [0, 255]; y quantized with them to uint8."""
    x = ctx.x(0)
    node, dtype = x.node, x.node.dtype
    zero, one = F.constant(0, dtype=dtype), F.constant(1, dtype=dtype)
    high = F.maximum(F.max(node, reduction_axes=node.axes), zero)
    low = F.minimum(F.min(node, reduction_axes=node.axes), zero)
    span = F.where(F.equal(high, low), one, high - low)
    scale = span / F.constant(255, dtype=dtype)
    lowest, highest = F.constant(0, dtype=dtype), F.constant(255, dtype=dtype)
    point = _round(F.minimum(F.maximum(zero - low / scale, lowest), highest))
    steps = _round(node / F.broadcast(scale, node.axes)) + F.broadcast(point, node.axes)
    uint8 = np.dtype(np.uint8)
    return [Tensor(_clipped(steps, uint8), x.axes), Tensor(scale, ()),
            Tensor(F.cast(point, uint8), ())]


def _shifted(ctx: Context, i: int, zero: int) -> Tensor:
    """Operand i as int32, less its zero point (input `zero`) where one is given."""
    t = ctx.x(i)
    node = F.cast(t.node, _INT32)
    if zero < ctx.arity and ctx.has(zero):
        node = node - broadcast_to(Tensor(F.cast(ctx.x(zero).node, _INT32),
                                          ctx.x(zero).axes), t.axes)
    return Tensor(node, t.axes)


@converter("MatMulInteger")
def _matmul_integer(ctx: Context):
    return [matmul(ctx, _shifted(ctx, 0, 2), _shifted(ctx, 1, 3))]


@converter("QLinearMatMul")
def _qlinear_matmul(ctx: Context):
    """(A - a_zero) @ (B - b_zero) in int32, times a_scale * b_scale / y_scale (in float64,
    as ONNX computes it), plus y_zero, rounded and clipped to y's type."""
    product = matmul(ctx, _shifted(ctx, 0, 2), _shifted(ctx, 3, 5))
    out = product.axes
    a_scale, b_scale, y_scale = (broadcast_to(ctx.x(i), out) for i in (1, 4, 6))
    ratio = F.cast(a_scale * b_scale / y_scale, np.float64)
    value = F.cast(product.node, np.float64) * fit(ratio, product.node.axes)
    if ctx.has(7):
        value = value + broadcast_to(Tensor(F.cast(ctx.x(7).node, np.float64),
                                            ctx.x(7).axes), out)
    return [Tensor(_clipped(_round(value), ctx.out_dtype()), out)]
