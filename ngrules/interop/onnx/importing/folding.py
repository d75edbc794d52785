"""Shape computations folded at import time, under a size budget.

Constant nodes, and nodes whose inputs are all known and that compute integer or boolean values
(the shape arithmetic exporters write: Shape, Gather, Concat, Range, ConstantOfShape...), are
evaluated with onnx's reference evaluator. Folded values become initializers and shape inference
runs again, so a Reshape whose target was computed gets a static output shape; this repeats
until nothing more folds. Before a node is evaluated its output's size is estimated (from the
inferred shape and from its inputs' values), and a value over `Limits.constant_bytes` is refused
naming the node and the size, so a small model cannot make the importer allocate gigabytes.
Nodes with subgraphs (Loop, If, Scan...) are never evaluated here: their cost has no bound.

A value computed from a symbolic dimension's stand-in length (`ir.symbolic`) is tracked
(`symbolic`): shape arithmetic over it folds (a few numbers), but a node whose output would
have more than `SYMBOLIC_FOLD` elements (a Range to the sequence length, a causal mask over it)
stays a graph computation, converted to nodes whose lengths stay symbolic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ngrules.errors import printable
from ngrules.interop.onnx import OnnxError, UnsupportedOp, ndarrays, proto
from ngrules.interop.onnx.budget import BudgetExceeded, Meter
from ngrules.interop.onnx.importing import fold_kernels, symbolic_slices
from ngrules.interop.onnx.importing.axes import Shapes
from ngrules.interop.onnx.importing.loading import Limits, one_line, tensor_array
from ngrules.interop.onnx.weights import STEERING_SIZE
from ngrules.ir import symbolic

_FLOAT_ELEMS = (1, 10, 11, 16)  # float32, float16, float64, bfloat16
_MAX_ROUNDS = 8
_STEERING_SIZE = STEERING_SIZE  # the same bound as the weights left out of the parsed model
#: The most elements a value computed from a symbolic length may have to be folded (a shape).
SYMBOLIC_FOLD = 64


def node_label(node) -> str:
    return f"{node.op_type} node {node.name or node.output[0]!r}"


def np_elem(dtype) -> int:
    """The ONNX element type of a numpy dtype (0 when there is none)."""
    try:
        return ndarrays.np_dtype_to_tensor_dtype(np.dtype(dtype))
    except (KeyError, TypeError, ValueError):
        return 0


class Folding:
    """The values known at import time (`consts`) and the shapes of the model as folded."""

    def __init__(self, model, lengths: Mapping[str, int], limits: Limits,
                 arrays: Mapping[str, np.ndarray] | None = None, meter: Meter | None = None):
        self.limits = limits
        self.meter = meter or Meter()
        self.lengths = lengths
        self.consts: dict[str, np.ndarray] = dict(arrays or {})  # weights left out of `model`
        self.base = self._given = model
        #: the default domain's opset, for `fold_kernels` (a copy of `model` keeps its imports)
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          None)
        self.symbolic: set[str] = set()  # values computed from a stand-in length
        self.sliced: dict[str, int] = {}  # a Slice read as Gathers: its output -> its inputs
        self.done: set[int] = set()
        self.shapes = self._infer()
        for _ in range(_MAX_ROUNDS):
            if not self._fold_round():
                break
            self.shapes = self._infer()

    # -- rounds -------------------------------------------------------------------------------
    def _infer(self) -> Shapes:
        model = self._current()
        held = 2 * model.ByteSize()  # onnx serialises the model and parses its result
        self.meter.charge(held, "ONNX shape inference")
        shapes = Shapes(model, self.lengths)
        self.meter.release(held)
        for init in shapes.model.graph.initializer:
            if init.name not in self.consts:
                self.consts[init.name] = tensor_array(init, f"initializer {init.name!r}")
        return shapes

    def _current(self):
        """The model without the folded nodes, their values as initializers."""
        if not self.done:
            return self.base

        model = proto.ModelProto()
        model.CopyFrom(self.base)
        graph = model.graph
        kept = [n for i, n in enumerate(self.base.graph.node) if i not in self.done]
        del graph.node[:]
        graph.node.extend(kept)
        have = {i.name for i in graph.initializer}
        for i in sorted(self.done):
            for name in self.base.graph.node[i].output:
                if name and name not in have and name in self.consts:
                    _known(graph, name, self.consts[name], model.ir_version)
        return model

    def _fold_round(self) -> bool:
        progress = False
        for i, node in enumerate(self.base.graph.node):
            if i in self.done:
                continue
            self.meter.check_time(f"folding {node_label(node)}")
            if self.symbolic and self._slice_as_gathers(i, node):
                return True  # the nodes after it moved: infer again, then go on
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                value = constant_value(node)
                self.meter.charge(value.nbytes, node_label(node))
                self.consts[node.output[0]] = value
            elif self.foldable(node):
                self.fold(node)
            else:
                continue
            self.done.add(i)
            progress = True
        return progress

    def _slice_as_gathers(self, i: int, node) -> bool:
        """A Slice to a symbolic length replaced by Range and Gather (`symbolic_slices`)."""
        found = symbolic_slices.as_gathers(self, node)
        if found is None:
            return False
        nodes, consts = found
        self.sliced[node.output[0]] = len(node.input)
        if self.base is self._given:  # never the caller's model
            self.base = proto.ModelProto()
            self.base.CopyFrom(self._given)
        graph = self.base.graph
        for name, value in consts.items():
            self.consts[name] = value
            self.symbolic.add(name)
            _known(graph, name, value, self.base.ir_version)
        kept = list(graph.node)
        del graph.node[:]
        graph.node.extend(kept[:i] + nodes + kept[i + 1:])
        self.done = {j if j < i else j + len(nodes) - 1 for j in self.done}
        return True

    # -- one node -----------------------------------------------------------------------------
    def foldable(self, node) -> bool:
        """A shape computation: every input known, some value an integer or bool array, no
        subgraph, an op of the standard domain."""
        if node.domain not in ("", "ai.onnx") or any(a.type in (5, 10) for a in node.attribute):
            return False
        inputs = [n for n in node.input if n]
        if node.op_type == "Shape" and inputs and self.shapes.known(inputs[0]):
            return True
        if not inputs or not all(n in self.consts for n in inputs):
            return False
        types = [np_elem(self.consts[n].dtype) for n in inputs]
        types += [self.shapes.elem.get(o) for o in node.output]
        if any(n in self.symbolic for n in inputs) and self._elements(node) > SYMBOLIC_FOLD:
            return False  # its size depends on a symbol: a graph computation
        return any(t not in _FLOAT_ELEMS for t in types)

    def fold(self, node) -> None:
        inputs = [n for n in node.input if n]
        if node.op_type == "Shape":
            shape = np.array(self.shapes.of(node.input[0]), dtype=np.int64)
            start, end = _int_attr(node, "start", 0), _int_attr(node, "end", None)
            self.consts[node.output[0]] = shape[start:end]
            if symbolic.symbols_of(tuple(int(d) for d in shape[start:end])):
                self.symbolic.add(node.output[0])
            return
        if any(n in self.symbolic for n in inputs):
            self.symbolic.update(o for o in node.output if o)
        estimate = self._estimate(node)
        self.check_size(node, estimate)
        _check_stand_ins(node, [self.consts[n] for n in inputs])
        label = node_label(node)
        self.meter.check(estimate * max(len(node.output), 1), f"folding {label}")
        if node.op_type == "ConstantOfShape" and node.input and node.input[0]:
            value = self._constant_of_shape(node)  # weights of light models: hundreds of
            self.meter.charge(value.nbytes, f"folding {label}")  # them, no evaluator each
            self.consts[node.output[0]] = value
            return
        try:
            results = self.meter.within(
                f"folding {label}", lambda: self._evaluate(node, [self.consts[n] for n in inputs]))
        except BudgetExceeded:
            raise
        except Exception as e:  # the reference evaluator's own errors, of many types
            raise OnnxError(f"cannot fold {label}: {one_line(e)[:300]}") from None
        for name, value in zip(node.output, results):
            if not isinstance(value, np.ndarray | np.generic):
                raise UnsupportedOp(f"{label}: a {type(value).__name__} value "
                                    f"({name!r}) is not supported")
            value = np.asarray(value)
            self.check_size(node, value.nbytes)
            self.meter.charge(value.nbytes, f"folding {label}")
            self.consts[name] = value

    def _evaluate(self, node, values: list) -> list:
        """The node's outputs: numpy's where onnx's reference evaluator is wrong (`_KERNELS`)
        or computes the same (`fold_kernels`: no `import onnx` for them), else the evaluator's."""
        own = _KERNELS.get(node.op_type)
        if own is not None:
            return own(node, *values)
        inputs = [n for n in node.input if n]
        computed = fold_kernels.run(node, self.opset, dict(zip(inputs, values)))
        if computed is not None:
            return computed
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(self._single_node_model(node)).run(
            None, dict(zip(inputs, values)))

    def _constant_of_shape(self, node) -> np.ndarray:
        shape = [int(d) for d in np.ravel(self.consts[node.input[0]])]
        if any(d < 0 for d in shape) or len(shape) > 32:
            raise OnnxError(f"{node_label(node)}: cannot make a tensor of shape {shape}")
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        fill = np.zeros(1, np.float32) if value is None else tensor_array(value, node_label(node))
        if fill.size != 1:
            raise OnnxError(f"{node_label(node)}: its value must have one element")
        return np.full(shape, fill.reshape(()), dtype=fill.dtype)

    def check_size(self, node, nbytes: float) -> None:
        """Refuse (naming the node) a constant of nbytes over the budget, before making it."""
        if nbytes > self.limits.constant_bytes:
            size = f"{nbytes:.3g}" if nbytes >= 1e15 else f"{int(nbytes)}"
            raise OnnxError(
                f"{node_label(node)}: its value would take {size} bytes, more than the limit "
                f"of {self.limits.constant_bytes} for a constant computed at import "
                "(raise it with --max-constant-bytes or Limits(constant_bytes=...))"
            )

    def _estimate(self, node) -> float:
        """Bytes of the largest output: the inferred shape's size, or what the inputs'
        values say, whichever is larger (in elements of the output's type)."""
        return _itemsize(self.shapes.elem.get(node.output[0])) * self._elements(node)

    def _elements(self, node) -> float:
        sizes = [0.0]
        for out in node.output:
            shape = self.shapes.shape.get(out)
            if shape is not None and all(d is not None and d >= 0 for d in shape):
                sizes.append(float(math.prod(shape)))
        values = [self.consts.get(n) if n else None for n in node.input]
        try:
            sizes.append(float(_elements(node.op_type, values)))
        except (ArithmeticError, ValueError, TypeError, IndexError):
            sizes.append(math.inf)
        return max(sizes)

    def _single_node_model(self, node):
        inputs = [n for n in node.input if n]
        ins = [proto.make_tensor_value_info(n, np_elem(self.consts[n].dtype), None)
               for n in inputs]
        outs = [proto.make_tensor_value_info(n, 0, None) for n in node.output if n]
        graph = proto.make_graph([node], "fold", ins, outs)
        return proto.make_model(graph, opset_imports=self.base.opset_import)


def _check_stand_ins(node, values: list) -> None:
    """A product of shape values that overflows int64 because it multiplies the stand-ins of
    symbolic dimensions (`ir.symbolic`: primes above 10^6; four of them pass 2^63) is named as
    such: onnx's evaluator would wrap it around silently, and the Reshape reading it would be
    blamed for it."""
    if node.op_type not in ("Mul", "ReduceProd") or not values:
        return
    if not all(v.dtype.kind in "iu" and v.size <= _STEERING_SIZE for v in values):
        return
    magnitudes = [[abs(int(x)) for x in v.ravel()] for v in values]
    if node.op_type == "Mul":
        bound = math.prod(max(m, default=0) for m in magnitudes[:2])
    else:
        bound = math.prod(magnitudes[0])
    symbols = sorted({s for m in magnitudes for x in m for s in symbolic.symbols_of(x)})
    if bound > _INT64_MAX and symbols:
        raise OnnxError(
            f"{printable(node_label(node))}: multiplies the symbolic dimensions "
            f"{printable(', '.join(symbols))}, whose stand-in lengths overflow int64: give "
            f"some of them a length (--length {printable(symbols[0])}=N, or lengths=...)")


_INT64_MAX = 2**63 - 1


def _known(graph, name: str, value: np.ndarray, ir_version: int) -> None:
    """A folded value for shape inference: small ones as initializers (their values steer
    shapes), large ones (weights a ConstantOfShape made) by their type alone, as an input."""
    if value.size <= _STEERING_SIZE:
        graph.initializer.append(ndarrays.from_array(value, name))
    if value.size > _STEERING_SIZE or ir_version < 4:  # before IR 4 initializers are inputs
        elem = np_elem(value.dtype)
        graph.input.append(proto.make_tensor_value_info(name, elem, value.shape))


def _elements(op: str, values: list) -> float:
    """An upper bound on the elements of the op's output from its inputs' values."""
    arrays = [v for v in values if v is not None]
    if not arrays:
        return 0
    first = arrays[0]
    if op == "ConstantOfShape":
        return math.prod(int(d) for d in np.ravel(first))
    if op == "Range":
        start, limit, delta = (float(np.ravel(v)[0]) for v in values[:3])
        return max(math.ceil((limit - start) / delta), 0)
    if op == "Tile":
        return first.size * math.prod(int(r) for r in np.ravel(values[1]))
    if op == "Expand":
        shape = [int(d) for d in np.ravel(values[1])]
        return math.prod(max(a, b) for a, b in _aligned(first.shape, shape))
    if op in ("MatMul", "MatMulInteger", "Gemm", "Einsum"):
        return math.prod(a.size for a in arrays)
    if op == "OneHot":
        return first.size * abs(int(np.ravel(values[1])[0]))
    if op == "Pad" and len(values) > 1:
        return math.prod(first.shape) + abs(int(np.sum(values[1]))) * max(first.size, 1)
    if op in ("Resize", "Upsample"):
        scales = [abs(float(s)) for v in values[1:] for s in np.ravel(v)]
        return first.size * max(math.prod(scales), 1) if scales else first.size
    return max(math.prod(_aligned_max(arrays)), max(a.size for a in arrays))


def _itemsize(elem) -> float:
    try:
        return float(np.dtype(ndarrays.tensor_dtype_to_np_dtype(elem)).itemsize)
    except (KeyError, TypeError, ValueError):
        return 8.0


def _aligned(a, b):
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    return zip(a, b)


def _aligned_max(arrays) -> list[int]:
    """numpy broadcasting's output shape, taking the larger length where they disagree."""
    shape: tuple = ()
    for a in arrays:
        shape = tuple(max(x, y) for x, y in _aligned(shape, a.shape))
    return list(shape)


def _gather_elements(node, data: np.ndarray, index: np.ndarray) -> list:
    """ONNX's GatherElements (onnx's evaluator fails past 64 rows: `np.choose`)."""
    axis = _int_attr(node, "axis", 0) % data.ndim
    length = data.shape[axis]
    if index.size and (index.min() < -length or index.max() >= length):
        raise IndexError(f"an index is outside [-{length}, {length})")
    index = np.where(index < 0, index + length, index).astype(np.int64)
    data = data[tuple(slice(None) if d == axis else slice(0, n)  # the output: index's shape
                      for d, n in enumerate(index.shape))]
    return [np.take_along_axis(data, index, axis)]


#: op type -> (node, *input values) -> output values, where onnx's evaluator is not used.
_KERNELS = {"GatherElements": _gather_elements}


def _int_attr(node, name: str, default):
    return next((a.i for a in node.attribute if a.name == name), default)


def constant_value(node) -> np.ndarray:
    """A Constant node's value (its data checked against its dims)."""
    if len(node.attribute) != 1:
        raise OnnxError(f"{node_label(node)}: a Constant needs exactly one value attribute")
    attr = node.attribute[0]
    if attr.name == "value":
        return tensor_array(attr.t, node_label(node))
    if attr.name in ("value_float", "value_int"):
        kind = np.float32 if attr.name == "value_float" else np.int64
        return np.array(attr.f if attr.name == "value_float" else attr.i, dtype=kind)
    if attr.name in ("value_floats", "value_ints"):
        kind = np.float32 if attr.name == "value_floats" else np.int64
        return np.array(attr.floats if attr.name == "value_floats" else attr.ints, dtype=kind)
    raise UnsupportedOp(f"{node_label(node)}: attribute {attr.name} is not supported")
