"""ONNX activations written from primitives (the IR's ops where it has them: Relu, Sigmoid,
Tanh, OneHot of Argmax), so rules see the forms a front end would build."""

from __future__ import annotations

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.shaping import Tensor, broadcast_to
from ngrules.ir import builders as F
from ngrules.ir.graph import Node, make_node


def _zero(x: Node) -> Node:
    return F.broadcast(F.constant(0, dtype=x.dtype), x.axes)


def _softplus(x: Node) -> Node:
    return F.log(F.exp(x) + 1.0)


def _hard_swish(ctx: Context, x: Node) -> Node:
    return x * F.maximum(F.minimum(x * (1.0 / 6.0) + 0.5, 1.0), 0.0)


def _selu(ctx: Context, x: Node) -> Node:
    alpha = ctx.attr("alpha", 1.67326319217681884765625)
    gamma = ctx.attr("gamma", 1.05070102214813232421875)
    return (F.maximum(x, 0.0) + (F.exp(F.minimum(x, 0.0)) - 1.0) * alpha) * gamma


def _celu(ctx: Context, x: Node) -> Node:
    alpha = ctx.attr("alpha", 1.0)
    return F.maximum(x, 0.0) + F.minimum((F.exp(x * (1.0 / alpha)) - 1.0) * alpha, 0.0)


def _thresholded(ctx: Context, x: Node) -> Node:
    return F.where(F.greater(x, F.constant(ctx.attr("alpha", 1.0), dtype=x.dtype)), x, _zero(x))


def _shrink(ctx: Context, x: Node) -> Node:
    """x + bias below -lambd, x - bias above lambd, else 0."""
    lambd, bias = ctx.attr("lambd", 0.5), ctx.attr("bias", 0.0)
    low = F.less(x, F.constant(-lambd, dtype=x.dtype))
    high = F.greater(x, F.constant(lambd, dtype=x.dtype))
    return F.where(low, x + bias, F.where(high, x - bias, _zero(x)))


_FORMS = {
    "HardSwish": _hard_swish,
    "Selu": _selu,
    "Celu": _celu,
    "ThresholdedRelu": _thresholded,
    "Shrink": _shrink,
    "Mish": lambda ctx, x: x * F.tanh(_softplus(x)),
    "Softsign": lambda ctx, x: x / (F.absolute(x) + 1.0),
    "Swish": lambda ctx, x: _swish(x, ctx.attr("alpha", 1.0)),
}


def _swish(x: Node, alpha: float) -> Node:
    """x * sigmoid(alpha x); in float16 as ONNX's formula rounds it, step by step."""
    if x.dtype.itemsize == 2:
        return x * F.reciprocal(F.exp(-(x * alpha)) + 1.0)
    return x * F.sigmoid(x * alpha)


@converter(*_FORMS)
def _activation(ctx: Context):
    x = ctx.x(0)
    return [Tensor(_FORMS[ctx.op](ctx, x.node), x.axes)]


@converter("PRelu")
def _prelu(ctx: Context):
    """x where x >= 0, slope * x elsewhere (the slope broadcast to x)."""
    x = ctx.x(0)
    slope = broadcast_to(ctx.x(1), x.axes)
    node = F.where(F.less(x.node, F.constant(0, dtype=x.node.dtype)), slope * x.node, x.node)
    return [Tensor(node, x.axes)]


@converter("Hardmax")
def _hardmax(ctx: Context):
    """1 at the first maximum along the axis, else 0: OneHot of the Argmax."""
    x = ctx.x(0)
    if ctx.importer.opset < 13:
        raise ctx.unsupported("Hardmax before opset 13 (over flattened dimensions)")
    axis = x.axes[ctx.attr("axis", -1) % len(x.axes)]
    found = F.argmax(x.node, reduction_axes=[axis])
    hot = make_node("OneHot", (found,), axis=axis, dtype=x.node.dtype)
    return [Tensor(hot, x.axes)]
