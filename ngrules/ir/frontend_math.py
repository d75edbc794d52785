"""Front-end builders for elementwise math beyond arithmetic: sigmoid, power, absolute, sign,
comparisons (bool results), `where` and `cast`. Re-exported by `ngrules.ir.frontend`."""

from __future__ import annotations

from ngrules.ir import frontend as F
from ngrules.ir.graph import Node, make_node


def sigmoid(x: Node) -> Node:
    """1 / (1 + exp(-x)), as one op (ngraph builds it as reciprocal(exp(-x) + 1))."""
    return make_node("Sigmoid", (x,))


def power(x: F.Operand, y: F.Operand) -> Node:
    """x ** y elementwise, with ngraph's broadcasting."""
    return F.apply_op("Power", (x, y))


def absolute(x: Node) -> Node:
    return make_node("Absolute", (x,))


def sign(x: Node) -> Node:
    """-1, 0 or 1 by the sign of x."""
    return make_node("Sign", (x,))
