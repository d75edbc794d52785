"""What an ONNX op converter sees: the registry of converters and one node's context."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ngrules.interop.onnx import OnnxError, UnsupportedOp, ndarrays, proto
from ngrules.interop.onnx.importing.shaping import Tensor, broadcast_to
from ngrules.ir.axes import Axis
from ngrules.ir.graph import Node, make_node

if TYPE_CHECKING:
    from ngrules.interop.onnx.importer import Importer

#: ONNX element type -> `graph_dtype`'s answer, as found (asked of every value read).
_GRAPH_DTYPES: dict[int, np.dtype | None] = {}


def graph_dtype(elem) -> np.dtype | None:
    """The numpy dtype of an ONNX element type, when an ngrules tensor can hold it."""
    if elem.__class__ is int and elem in _GRAPH_DTYPES:
        return _GRAPH_DTYPES[elem]
    from ngrules.ir.builtin.common import DTYPES

    try:
        dtype = np.dtype(ndarrays.tensor_dtype_to_np_dtype(elem))
    except (KeyError, TypeError, ValueError):
        return None
    dtype = dtype if dtype in DTYPES else None
    if elem.__class__ is int:
        _GRAPH_DTYPES[elem] = dtype
    return dtype

#: op_type -> converter(ctx) -> list of Tensors (one per output); filled by the op modules.
CONVERTERS: dict[str, Callable[[Context], list]] = {}


#: op_type -> the domains its converter reads (the default domain unless it says otherwise).
DOMAINS: dict[str, tuple[str, ...]] = {}

#: graph input placeholder -> its position among the model's inputs, as the last import that
#: made it read them (placeholders are shared between graphs): the exporter writes the inputs
#: in that order.
INPUT_ORDER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: Nodes the importer read from a model's own Reshape or Flatten: the Reshape that writes one
#: back is marked `exporting.layout.KEPT_RESHAPE`, so the last pass does not make it an Unsqueeze or
#: Squeeze.
READ_AS_RESHAPE: weakref.WeakSet = weakref.WeakSet()
#: Those of them read from a model's Flatten: the Reshape that writes one back is marked
#: `exporting.layout.KEPT_FLATTEN`, and `unit_views` writes it as the Flatten it is where one can
#: be.
READ_AS_FLATTEN: weakref.WeakSet = weakref.WeakSet()
#: A model's Softmax, LogSoftmax or Hardmax composite read between a Transpose and its inverse
#: (ONNX's expanded softmax cross-entropy): node -> its operand's axes in the order before the
#: Transpose. The exporter writes the pair back around the op (`composites.whole`); a rule that
#: rewrites the op or what it reads makes a new node, which the pair does not follow.
READ_TRANSPOSED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def transposed_pair(importer: Importer, node) -> tuple | None:
    """The axes of `node`'s first operand in the order before the model's Transpose it reads,
    when the only reader of its output is the inverse Transpose; else None."""
    before = importer._producers().get(node.input[0])
    readers = [n for n in importer.graph.node if node.output[0] in n.input]
    if (before is None or before.op_type != "Transpose" or len(readers) != 1
            or readers[0].op_type != "Transpose" or before.input[0] not in importer.values
            or any(o.name == node.output[0] for o in importer.graph.output)):
        return None
    source = importer.values[before.input[0]].axes
    perm, back = (_perm_of(n, len(source)) for n in (before, readers[0]))
    return source if [perm[i] for i in back] == list(range(len(source))) else None


def _perm_of(node, rank: int) -> list[int]:
    """A Transpose node's permutation (reversal by default)."""
    perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
    return perm or list(range(rank))[::-1]


def converter(*op_types: str, domain: str = ""):
    """Register a converter for these ONNX op types (of the default domain, or `domain`)."""

    def register(fn):
        for op in op_types:
            CONVERTERS[op] = fn
            DOMAINS[op] = (domain,) if domain else ("", "ai.onnx")
        return fn

    return register


class Context:
    """What a converter sees of one ONNX node: inputs as tensors or constants, attributes,
    the named axes of its outputs."""

    def __init__(self, importer: Importer, node):
        self.importer = importer
        self.node = node
        self.op = node.op_type
        self._attrs = {a.name: a for a in node.attribute}

    @property
    def label(self) -> str:
        return f"{self.op} node {self.node.name!r}" if self.node.name else f"{self.op} node"

    def unsupported(self, what: str) -> UnsupportedOp:
        return UnsupportedOp(f"{self.label}: {what} is not supported")

    def has(self, i: int) -> bool:
        return i < len(self.node.input) and bool(self.node.input[i])

    @property
    def arity(self) -> int:
        return len(self.node.input)

    def x(self, i: int) -> Tensor:
        """Input i as a tensor of the graph."""
        return self.importer.tensor(self.node.input[i], self)

    def const(self, i: int) -> np.ndarray | None:
        """Input i's value when it is known at import time."""
        return self.importer.consts.get(self.node.input[i]) if self.has(i) else None

    def need_const(self, i: int, what: str) -> np.ndarray:
        value = self.const(i)
        if value is None:
            raise self.unsupported(f"a {what} computed at run time")
        return value

    def scalar(self, value, dtype: np.dtype, what: str) -> float | int:
        """A one-element constant (an attribute or an input) as a value a tensor of `dtype`
        can hold: a model giving several values, or inf, NaN or an out-of-range number for an
        integer tensor, contradicts itself."""
        array = np.asarray(value)
        if array.size != 1 or array.dtype.kind not in "biuf":
            raise OnnxError(f"{self.label}: the {what} is not one number "
                            f"(shape {array.shape}, type {array.dtype})")
        number = array.reshape(()).item()
        if dtype.kind in "iu" and not (np.isfinite(number) and
                                       np.iinfo(dtype).min <= number <= np.iinfo(dtype).max):
            raise OnnxError(f"{self.label}: the {what} {number} does not fit the input's "
                            f"type {dtype}")
        return number

    def attr(self, name: str, default: Any = None) -> Any:
        a = self._attrs.get(name)
        if a is None:
            return default

        value = proto.get_attribute_value(a)
        if not isinstance(value, bytes):
            return value
        try:
            return value.decode()
        except UnicodeDecodeError:
            raise OnnxError(f"{self.label}: attribute {name} is not UTF-8 text") from None

    def out_axes(self, i: int = 0) -> tuple[Axis, ...]:
        return self.importer.naming.axes(self.node.output[i], self.node.name)

    def out_shape(self, i: int = 0) -> tuple[int, ...]:
        return self.importer.shapes.of(self.node.output[i], self.node.name)

    def out_dtype(self, i: int = 0) -> np.dtype:
        elem = self.importer.shapes.elem.get(self.node.output[i])
        dtype = graph_dtype(elem)
        if dtype is None:
            raise self.unsupported(f"output element type {elem_name(elem)}")
        return dtype

    def result(self, node: Node, i: int = 0) -> Tensor:
        """A node whose axes are (as a set) output i's."""
        return Tensor(node, self.out_axes(i))


def elem_name(elem) -> str:
    try:
        return proto.TensorProto.DataType.Name(elem)
    except (ValueError, TypeError):
        return str(elem)


def elementwise(ctx: Context, op: str, *tensors: Tensor) -> Tensor:
    """An elementwise ngrules op over numpy-broadcast ONNX operands."""
    out = ctx.out_axes(0)
    args = [broadcast_to(t, out) for t in tensors]
    return Tensor(make_node(op, args), out)


