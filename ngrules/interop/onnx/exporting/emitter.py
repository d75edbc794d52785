"""What the exporter's op writers share: the Emitter (ONNX nodes, initializers, each value's
layout) and the registry of ops written in the order the exporter chooses."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

from ngrules.interop.onnx import ndarrays, proto
from ngrules.interop.onnx.budget import DEFAULT_BUDGET, Meter
from ngrules.interop.onnx.exporting.layout import Layouts, Value
from ngrules.interop.onnx.weights import separable
from ngrules.ir.graph import Node, toposort

#: The opset written by default; `to_onnx(opset=...)` takes 17 up to the installed onnx's
#: latest, at most 28 (Gelu is standard from 20). A model read at an opset in this range is
#: written back at its own (`cli.graphio.written_opset`).
OPSET = 17
OPSETS = range(17, 29)


class Emitter(Layouts):
    """Collects ONNX nodes, initializers and each ngrules value's `Value`."""

    def __init__(self, opset: int = OPSET, users: dict | None = None, separate: bool = False):
        self.opset = opset
        self.meter = Meter(DEFAULT_BUDGET, "export")  # the job's, set by `export_parts`
        self.users: dict[Node, int] = users or {}
        self.nodes: list = []
        self.inits: list = []
        #: With `separate`, large initializers (`weights.separable`) stay arrays here
        #: (name -> array), so a model's weights are copied at most once, when written.
        self.weights: dict[str, np.ndarray] | None = {} if separate else None
        self.inputs: list = []
        self.functions: set[str] = set()
        self.parts: dict[Node, list[str]] = {}
        #: ONNX value -> (op, index of its node) for a Conv or 2-D MatMul that may take a bias.
        self.biasable: dict[str, tuple[str, int]] = {}
        #: ONNX Slice output -> (its input, (starts, ends, axes, steps)), to merge slices.
        self.slices: dict[str, tuple[str, tuple]] = {}
        #: Slice output along one axis, step 1 -> the length of that axis in its input (for
        #: slices of one value that become one Split, `finish`).
        self.slice_extent: dict[str, int] = {}
        #: node -> the order of axes its reader wants (for ops free to choose, as Einsum).
        self.prefer: dict[Node, tuple] = {}
        #: slice node -> the order to slice its operand in (`read_orders.slice_sources`).
        self.slice_source: dict[Node, tuple] = {}
        #: nodes a Conv or pooling reads (through views): a reduction keeps its unit dims.
        self.window_read: set[Node] = set()
        #: the exporter's own `emit(em, node)` (set by `to_onnx`), for writers that write a
        #: body of nodes they build.
        self.emit: Callable | None = None
        self._fresh = itertools.count()
        self.__init_layouts__()

    def fresh(self, hint: str = "v") -> str:
        return f"{hint}{next(self._fresh)}"

    def node(self, op: str, inputs: Sequence[str], n_out: int = 1, domain: str = "", **attrs):
        outs = [self.fresh() for _ in range(n_out)]
        self.nodes.append(proto.make_node(op, list(inputs), outs, domain=domain, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype=np.int64) -> str:
        name = self.fresh("c")
        self.initializer(np.asarray(value, dtype=dtype), name)
        return name

    def initializer(self, array: np.ndarray, name: str) -> None:
        if self.weights is not None and separable(array):
            self.weights[name] = array
        else:
            self.inits.append(ndarrays.from_array(array, name))

    def value(self, node: Node) -> str:
        """The node's data in its own order of axes."""
        return self.exact(node)

    def write(self, outputs: Sequence[Node]) -> list[Value]:
        """Write nodes built here (a fused op's body on its arguments), each once, counting
        their readers as the exporter counts the graph's."""
        order = toposort(outputs)
        for n in order:
            for a in n.args:
                if a not in self.values:
                    self.users[a] = self.users.get(a, 0) + 1
        for n in order:
            if n not in self.values:
                self.emit(self, n)
        return [self.values[o] for o in outputs]

    def single_use(self, node: Node) -> bool:
        """Whether one node reads this one (so it can be folded into its reader)."""
        return self.users.get(node, 0) == 1


#: op name -> (Emitter, node) -> Value, for ops written in the order the exporter chooses.
LAYOUT: dict[str, Callable[[Emitter, Node], Value]] = {}


def layout_exporter(*ops: str):
    def register(fn):
        for op in ops:
            LAYOUT[op] = fn
        return fn

    return register


def preferred_orders(order: Sequence[Node], outputs: Sequence[Node], users) -> dict:
    """For nodes whose value a reader will want in one order: a graph output (its own
    order) and the operand of a Flatten that merges axes (row-major in its axes), looking through
    reorderings read only there."""
    prefer: dict[Node, tuple] = {}

    def want(node: Node, axes) -> None:
        prefer.setdefault(node, tuple(axes))
        while node.op == "ReorderAxes" and users.get(node, 0) == 1:
            node = node.args[0]
            prefer.setdefault(node, tuple(axes))

    for out in outputs:
        want(out, out.axes)
    for n in order:
        if n.op == "Flatten" and any(_merges(a) for a in n.axes):
            want(n.args[0], n.args[0].axes)
    return prefer


#: Ops that change only the record of a value's dimensions.
VIEWS = ("Broadcast", "ReorderAxes", "Transpose", "ExpandDims", "AxesCast")


def window_operands(order: Sequence[Node]) -> set[Node]:
    """The nodes a Conv or pooling reads as its data, and the nodes under their views: a
    reduction read there keeps its unit dimensions. An ONNX op kept whole reads its operands
    as ONNX has them: a reduction under views that add dimensions keeps them too, one it
    reads in its own axes does not (a CNN's head: one ReduceMean, then the Gemm, no Squeeze
    between)."""
    from ngrules.ir.composite import is_composite

    read: set[Node] = set()
    for n in order:
        whole = is_composite(n.op)
        if n.op in ("Convolution", "Pooling") or whole:
            for node in n.args if whole else n.args[:1]:
                chain = [node]
                while chain[-1].op in VIEWS:
                    chain.append(chain[-1].args[0])
                if not whole or len(node.axes) > len(chain[-1].axes):
                    read.update(chain)
    return read


def _merges(axis) -> bool:
    """Whether a flattened axis merges two or more axes longer than 1."""
    return axis.is_flattened and sum(a.length > 1 for a in axis.leaves()) > 1
