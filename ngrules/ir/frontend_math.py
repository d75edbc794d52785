"""Front-end builders for elementwise math beyond arithmetic: sigmoid, power, absolute, sign,
comparisons (bool results), `where` and `cast`. Re-exported by `ngrules.ir.frontend`."""

from __future__ import annotations

import numpy as np

from ngrules.ir import frontend as F
from ngrules.ir.graph import Node, make_node


def sigmoid(x: Node) -> Node:
    """1 / (1 + exp(-x)), as one op (ngraph builds it as reciprocal(exp(-x) + 1))."""
    return make_node("Sigmoid", (x,))


def erf(x: Node) -> Node:
    """The error function (GELU's exact form is 0.5 * x * (1 + erf(x / sqrt(2))))."""
    return make_node("Erf", (x,))


def power(x: F.Operand, y: F.Operand) -> Node:
    """x ** y elementwise, with ngraph's broadcasting."""
    return F.apply_op("Power", (x, y))


def absolute(x: Node) -> Node:
    return make_node("Absolute", (x,))


def sign(x: Node) -> Node:
    """-1, 0 or 1 by the sign of x."""
    return make_node("Sign", (x,))


# -- comparisons (bool results), select, cast ----------------------------------------------------
def equal(x: F.Operand, y: F.Operand) -> Node:
    return F.apply_op("Equal", (x, y))


def not_equal(x: F.Operand, y: F.Operand) -> Node:
    return F.apply_op("NotEqual", (x, y))


def greater(x: F.Operand, y: F.Operand) -> Node:
    return F.apply_op("Greater", (x, y))


def less(x: F.Operand, y: F.Operand) -> Node:
    return F.apply_op("Less", (x, y))


def greater_equal(x: F.Operand, y: F.Operand) -> Node:
    return F.apply_op("GreaterEqual", (x, y))


def less_equal(x: F.Operand, y: F.Operand) -> Node:
    return F.apply_op("LessEqual", (x, y))


def where(cond: Node, x: F.Operand, y: F.Operand) -> Node:
    """x where cond (a bool tensor), else y; all three broadcast to common axes."""
    if not isinstance(x, Node):
        x = F.constant(x, dtype=y.dtype if isinstance(y, Node) else np.float32)
    if not isinstance(y, Node):
        y = F.constant(y, dtype=x.dtype)
    out = F.elementwise_axes(F.elementwise_axes(cond.axes, x.axes), y.axes)
    args = tuple(F.broadcast(a, out) for a in (cond, x, y))
    return make_node("Select", args)


def cast(x: Node, dtype) -> Node:
    """x converted to dtype (x itself when it already has it)."""
    if x.dtype == np.dtype(dtype):
        return x
    return make_node("Cast", (x,), dtype=dtype)


# -- functions, rounding, logic (the ops ONNX networks use) ------------------------------------
def sin(x: Node) -> Node:
    return make_node("Sin", (x,))


def cos(x: Node) -> Node:
    return make_node("Cos", (x,))


def atan(x: Node) -> Node:
    return make_node("Atan", (x,))


def floor(x: Node) -> Node:
    return make_node("Floor", (x,))


def ceil(x: Node) -> Node:
    return make_node("Ceil", (x,))


def mod(x: F.Operand, y: F.Operand, fmod: bool = False) -> Node:
    """x - y * floor(x / y) (the sign of y), or with fmod x - y * trunc(x / y) (of x)."""
    if fmod:
        node = F.apply_op("Add", (x, y))  # the operands broadcast as for any binary op
        return make_node("Mod", node.args, fmod=1)
    return F.apply_op("Mod", (x, y))


def logical_and(x: F.Operand, y: F.Operand) -> Node:
    return F.apply_op("And", (x, y))


def logical_or(x: F.Operand, y: F.Operand) -> Node:
    return F.apply_op("Or", (x, y))


def logical_not(x: Node) -> Node:
    return make_node("Not", (x,))


def isnan(x: Node) -> Node:
    return make_node("IsNaN", (x,))
