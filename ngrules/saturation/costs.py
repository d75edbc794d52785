"""The cost of one node for extraction: FLOPs plus bytes moved, from the op table's traits and
the node's axes (lengths), plus a fixed cost per node.

Not measured on hardware: a model of the work each op does (bench/saturation_costs.md lists
the table and why). Every node costs at least `PER_NODE` > 0, so a cheapest choice never
takes a cycle (see `extract`), and of two graphs doing the same work the one with fewer nodes
wins.
"""

from __future__ import annotations

import functools
import math

from ngrules.ir import composite
from ngrules.ir.graph import Node, toposort
from ngrules.ir.ops import OPS

#: What every node costs besides its work (a kernel launch, a schedule step), in the units of
#: the work (a FLOP or a byte moved): onnxruntime's CPU runs a node of a few elements in
#: ~0.3 us and ~0.01-0.02 ns per unit of work (a Relu or Tanh chain, bench/saturation_costs.md).
PER_NODE = 20_000.0

#: Ops whose nodes cost their work only: the exporter writes the slices of one value as one
#: `Split`, so the per-node cost is paid once by the value they share, not once per part;
#: an `Output` reads output i of a multi-output node, which paid it.
SHARED_LAUNCH = frozenset({"Slice", "Output"})

#: FLOPs per output element of elementwise ops that cost more than one (transcendental ops
#: as a few multiply-adds of a polynomial; division and roots as a few).
ELEMENTWISE_FLOPS = {
    "Exp": 8, "Log": 8, "Tanh": 8, "Sigmoid": 8, "Erf": 8, "Sin": 8, "Cos": 8, "Atan": 8,
    "Power": 16, "Divide": 4, "Reciprocal": 4, "Sqrt": 4, "Mod": 4, "TruncDivide": 4,
}

#: Ops that only move data (their cost is the bytes they read and write).
MOVES = frozenset({"Slice", "Concat", "Pad", "Gather", "TensorSlice", "Unslice", "OneHot"})

#: Ops that read only the part of their argument they write.
PARTS = frozenset({"Slice", "TensorSlice"})

#: Ops that cost nothing beyond `PER_NODE`: reading output i of a multi-output node.
FREE = frozenset({"Output"})

#: FLOPs per input element of fused kernels and other ops the table has no formula for.
FUSED_FLOPS = 5


def _size(node: Node) -> int:
    if node.outputs is not None:
        return sum(math.prod(ax.lengths) for ax, _ in node.outputs)
    return math.prod(node.axes.lengths)


def _itemsize(node: Node) -> int:
    if node.outputs is not None:
        return max((dt.itemsize for _, dt in node.outputs), default=4)
    return node.dtype.itemsize if node.dtype is not None else 4


def _contracted(node: Node) -> float:
    """Products: FLOPs of the multiply-adds. The contracted length is what the operands share
    beyond the output: sqrt(|x||y|/|out|) for a product of two operands."""
    out = max(_size(node), 1)
    if node.op == "Convolution" and len(node.args) >= 2:
        w = node.args[1]
        shared = math.prod(a.length for a in w.axes if a.name in node.axes.names)
        return 2.0 * out * _size(w) / max(shared, 1)
    x, y = node.args[0], node.args[1]
    return 2.0 * out * math.sqrt(max(_size(x) * _size(y) / out, 1.0))


def flops(node: Node) -> float:
    """The arithmetic a node does, by op family."""
    op = node.op
    opdef = OPS.get(op)
    traits = opdef.traits if opdef is not None else frozenset()
    if "leaf" in traits or "view" in traits or op in FREE or op in MOVES:
        return 0.0
    if "elementwise" in traits:
        return float(ELEMENTWISE_FLOPS.get(op, 1) * _size(node))
    if "reduction" in traits:
        return float(_size(node.args[0]))
    if op in ("Dot", "DotLowDimension", "Convolution") and len(node.args) >= 2:
        return _contracted(node)
    if composite.is_composite(op):
        return _body_flops(node)
    inputs = sum(_size(a) for a in node.args)
    return float(FUSED_FLOPS * max(inputs, _size(node)))


@functools.lru_cache(maxsize=4096)
def _body_flops(node: Node) -> float:
    """A composite op (an ONNX op kept whole) does the arithmetic of its body: so a graph
    with it whole and one with it lowered cost the same work (bounded memo: nodes are
    hash-consed, one body per node)."""
    inner = toposort([composite.body(node, composite.stand_ins(node))])
    return sum(flops(n) for n in inner if n.op != "Placeholder")


def bytes_moved(node: Node) -> float:
    """Bytes read and written: every argument and the output, unless the node is a leaf (its
    data is there already), a view (it computes nothing) or free."""
    opdef = OPS.get(node.op)
    traits = opdef.traits if opdef is not None else frozenset()
    if "leaf" in traits or "view" in traits or node.op in FREE:
        return 0.0
    if node.op in PARTS:  # reads only the part it writes
        return float(2 * _size(node) * _itemsize(node))
    moved = sum(_size(a) * _itemsize(a) for a in node.args) + _size(node) * _itemsize(node)
    return float(moved)


def node_cost(node: Node) -> float:
    """FLOPs plus bytes moved plus `PER_NODE` (1 for a slice: see `SHARED_LAUNCH`): the
    extraction's cost of one node."""
    opdef = OPS.get(node.op)
    leaf = opdef is not None and "leaf" in opdef.traits  # data already there: no kernel
    launch = 1.0 if leaf or node.op in SHARED_LAUNCH else PER_NODE
    return launch + flops(node) + bytes_moved(node)


def graph_cost(outputs) -> float:
    """The cost of a graph: each distinct node counted once (shared subgraphs once)."""
    return sum(node_cost(n) for n in toposort(list(outputs)))
