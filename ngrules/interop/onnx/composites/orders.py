"""The orders of dimensions an ONNX op kept whole reads and writes, for the exporter's choice
of where to transpose a sliced value (`exporting/read_orders.py`)."""

from __future__ import annotations

from ngrules.interop.onnx.composites.specs import graph_of
from ngrules.interop.onnx.composites.whole import (
    RAISED,
    _one_node,
    _perm,
    positional,
)
from ngrules.ir.graph import Node


def operand_orders(n: Node) -> list[tuple[Node, tuple]]:
    """Each argument of composite n with the order of its axes the ONNX node reads it in
    (what `whole.write` asks of the exporter when it writes the node whole)."""
    graph = graph_of(n.attrs["spec"])
    orders = {v.name: _perm(v) for v in graph.input}
    return [(n.args[int(name[1:])], positional(n.args[int(name[1:])], orders[name]))
            for name in graph.node[0].input if name.startswith("a")]


def output_order(n: Node) -> tuple:
    """Composite n's axes in the order its ONNX node writes them."""
    outputs = {int(v.name[1:]): v for v in graph_of(n.attrs["spec"]).output}
    return positional(n, _perm(outputs[n.attrs["output"]]))


def writes_whole(n: Node) -> bool:
    """Whether composite n is written as its ONNX node whatever order its operands are in
    (else, where they are not in that order, its body in theirs: `whole.write`)."""
    return not (n.op in RAISED or _one_node(n))
