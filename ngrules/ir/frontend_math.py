"""Front-end builders for elementwise math beyond arithmetic: sigmoid, power, absolute, sign,
comparisons (bool results), `where` and `cast`. Re-exported by `ngrules.ir.frontend`."""

from __future__ import annotations

from ngrules.ir.graph import Node, make_node


def sigmoid(x: Node) -> Node:
    """1 / (1 + exp(-x)), as one op (ngraph builds it as reciprocal(exp(-x) + 1))."""
    return make_node("Sigmoid", (x,))
