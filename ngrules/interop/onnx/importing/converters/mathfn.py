"""ONNX elementwise functions: rounding and Mod as ngrules ops, the trigonometric and
hyperbolic functions from Sin, Cos, Atan, Exp, Log and Sqrt in forms that stay finite and
accurate over each function's domain."""

from __future__ import annotations

import math

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.shaping import Tensor, broadcast_to
from ngrules.ir import builders as F
from ngrules.ir.graph import Node, make_node


def _op(name: str):
    return lambda x: make_node(name, (x,))


def _asin(x: Node) -> Node:
    """2 atan(x / (1 + sqrt(1 - x^2))): no division by zero at x = +-1."""
    return 2.0 * _op("Atan")(x / (F.sqrt(1.0 - x * x) + 1.0))


def _asinh(x: Node) -> Node:
    """sign(x) log(|x| + sqrt(x^2 + 1)): no cancellation for negative x."""
    a = F.absolute(x)
    return F.sign(x) * F.log(a + F.sqrt(a * a + 1.0))


_FUNCTIONS = {
    "Floor": _op("Floor"),
    "Ceil": _op("Ceil"),
    "Round": _op("Round"),
    "Sin": _op("Sin"),
    "Cos": _op("Cos"),
    "Atan": _op("Atan"),
    "Tan": lambda x: _op("Sin")(x) / _op("Cos")(x),
    "Asin": _asin,
    "Acos": lambda x: math.pi / 2 - _asin(x),
    "Sinh": lambda x: (F.exp(x) - F.exp(-x)) * 0.5,
    "Cosh": lambda x: (F.exp(x) + F.exp(-x)) * 0.5,
    "Asinh": _asinh,
    "Acosh": lambda x: F.log(x + F.sqrt(x * x - 1.0)),
    "Atanh": lambda x: F.log((x + 1.0) / (1.0 - x)) * 0.5,
}


@converter(*_FUNCTIONS)
def _function(ctx: Context):
    x = ctx.x(0)
    return [Tensor(_FUNCTIONS[ctx.op](x.node), x.axes)]


@converter("Mod")
def _mod(ctx: Context):
    out = ctx.out_axes(0)
    x, y = (broadcast_to(ctx.x(i), out) for i in (0, 1))
    return [Tensor(make_node("Mod", (x, y), fmod=int(ctx.attr("fmod", 0))), out)]
