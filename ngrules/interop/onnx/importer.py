"""`from_onnx`: an ONNX model as an ngrules graph over named axes.

Graph inputs become placeholders, float initializers constants; integer values that only steer
shapes (Reshape targets, Slice bounds, reduction axes, Gather indices) stay import-time arrays,
and nodes computing only such values are folded with onnx's reference evaluator. Each ONNX node
is translated by its converter (`converters/`), which builds ngrules nodes through the front end;
ops with no single ngrules op are built from primitives (fusing them is the rules' job).
Dimensions get named axes by unification (`axes`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ngrules.interop.onnx import OnnxError, UnsupportedOp, dynamic, require_onnx
from ngrules.interop.onnx.axes import Naming, Shapes, name_axes
from ngrules.interop.onnx.context import CONVERTERS, Context, elem_name, graph_dtype
from ngrules.interop.onnx.shaping import Tensor, conform
from ngrules.ir import builders as F
from ngrules.ir.graph import Node


def supported_ops() -> list[str]:
    _load_converters()
    return sorted(CONVERTERS)


def _load_converters() -> None:
    import ngrules.interop.onnx.converters  # noqa: F401


@dataclass
class Imported:
    """An imported model: output nodes (ONNX's order of axes), input and output names."""

    outputs: list[Node]
    output_names: list[str]
    inputs: dict[str, Node] = field(default_factory=dict)
    naming: Naming | None = None


class Importer:
    def __init__(self, model, lengths: Mapping[str, int], axis_names, constants):
        model = _bind_constants(model, constants) if constants else model
        self.shapes = Shapes(model, lengths)
        self.graph = self.shapes.model.graph
        self.opset = next(
            (o.version for o in self.shapes.model.opset_import if o.domain in ("", "ai.onnx")), 1
        )
        self.consts: dict[str, np.ndarray] = {}
        self.values: dict[str, Tensor] = {}
        self.placeholders: dict[str, Node] = {}
        from onnx import numpy_helper

        for init in self.graph.initializer:
            self.consts[init.name] = numpy_helper.to_array(init)
        self._fold_constants_first()
        self.naming = name_axes(self.shapes, self.consts, axis_names)

    def _fold_constants_first(self) -> None:
        """Constant nodes' values, so that the naming can read reduction axes and the like."""
        for node in self.graph.node:
            if node.op_type == "Constant":
                self.consts[node.output[0]] = _constant_value(node)

    # -- values -------------------------------------------------------------------------------
    def tensor(self, name: str, ctx: Context | None = None) -> Tensor:
        if name in self.values:
            return self.values[name]
        if name in self.consts:
            value = self.consts[name]
            if graph_dtype(_np_elem(value.dtype)) is None:
                where = ctx.label if ctx else "the graph"
                raise UnsupportedOp(f"{where}: {value.dtype} tensor {name!r} is not supported")
            axes = self.naming.axes(name)
            t = Tensor(F.constant(value, axes, dtype=value.dtype), axes)
            self.values[name] = t
            return t
        raise OnnxError(f"value {name!r} is used before it is computed")

    def add_input(self, vi) -> None:
        if vi.name in self.consts:
            return
        elem = vi.type.tensor_type.elem_type
        if graph_dtype(elem) is None:
            raise UnsupportedOp(f"graph input {vi.name!r}: element type {elem_name(elem)} "
                                "is not supported")
        self.shapes.of(vi.name)
        axes = self.naming.axes(vi.name)
        node = F.placeholder(axes, graph_dtype(elem), name=vi.name)
        self.placeholders[vi.name] = node
        self.values[vi.name] = Tensor(node, axes)

    # -- nodes --------------------------------------------------------------------------------
    def convert(self, node) -> None:
        if node.op_type == "Constant":
            return
        if self._foldable(node):
            self._fold(node)
            return
        fn = CONVERTERS.get(node.op_type)
        ctx = Context(self, node)
        if fn is None or node.domain not in ("", "ai.onnx"):
            raise UnsupportedOp(
                f"unsupported ONNX op {node.op_type} (node {node.name or node.output[0]!r}); "
                f"supported: {', '.join(sorted(CONVERTERS))}"
            )
        outs = fn(ctx)
        for i, t in enumerate(outs):
            if t is None or i >= len(node.output) or not node.output[i]:
                continue
            want = ctx.out_axes(i)
            got = tuple(t.node.axes) if isinstance(t, Node) else None
            t = Tensor(t, self._positional(got, want)) if got is not None else t
            self.values[node.output[i]] = conform(t, want)

    @staticmethod
    def _positional(got, want):
        """Axes for a bare node from a converter: its own order, when the names are not
        already those of the output (then any order matching by name)."""
        if {a.name for a in got} == {a.name for a in want}:
            return want
        return got

    def _foldable(self, node) -> bool:
        """Shape computations: every input known, and some value an integer or bool array."""
        inputs = [n for n in node.input if n]
        if node.op_type == "Shape" and inputs and self.shapes.known(inputs[0]):
            return True
        if not inputs or not all(n in self.consts for n in inputs):
            return False
        types = [_np_elem(self.consts[n].dtype) for n in inputs]
        types += [self.shapes.elem.get(o) for o in node.output]
        return any(t not in _FLOAT_ELEMS for t in types)

    def _fold(self, node) -> None:
        if node.op_type == "Shape":
            shape = np.array(self.shapes.of(node.input[0]), dtype=np.int64)
            start, end = (_int_attr(node, "start", 0), _int_attr(node, "end", None))
            self.consts[node.output[0]] = shape[start:end]
            return
        from onnx.reference import ReferenceEvaluator

        inputs = [n for n in node.input if n]
        try:
            results = ReferenceEvaluator(_single_node_model(node, self)).run(
                None, {n: self.consts[n] for n in inputs}
            )
        except Exception as e:
            raise OnnxError(f"cannot fold {node.op_type} node {node.name!r}: {e}") from None
        for name, value in zip(node.output, results):
            self.consts[name] = np.asarray(value)

    def output(self, name: str) -> Node:
        """A graph output, its axes in ONNX's order."""
        return self.tensor(name).ordered()


_FLOAT_ELEMS = (1, 10, 11)  # float32, float16, float64


def _np_elem(dtype) -> int:
    from onnx import helper

    try:
        return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    except (KeyError, TypeError, ValueError):
        return 0


def _int_attr(node, name: str, default):
    return next((a.i for a in node.attribute if a.name == name), default)


def _constant_value(node) -> np.ndarray:
    from onnx import numpy_helper

    attr = node.attribute[0]
    if attr.name == "value":
        return numpy_helper.to_array(attr.t)
    if attr.name in ("value_float", "value_int"):
        kind = np.float32 if attr.name == "value_float" else np.int64
        return np.array(attr.f if attr.name == "value_float" else attr.i, dtype=kind)
    if attr.name in ("value_floats", "value_ints"):
        kind = np.float32 if attr.name == "value_floats" else np.int64
        return np.array(attr.floats if attr.name == "value_floats" else attr.ints, dtype=kind)
    raise UnsupportedOp(f"Constant node {node.name!r}: attribute {attr.name} is not supported")


def _single_node_model(node, importer: Importer):
    from onnx import helper

    inputs = [n for n in node.input if n]
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(
        importer.consts[n].dtype), None) for n in inputs]
    outs = [helper.make_tensor_value_info(n, 0, None) for n in node.output if n]
    graph = helper.make_graph([node], "fold", ins, outs)
    return helper.make_model(graph, opset_imports=importer.shapes.model.opset_import)


def _bind_constants(model, constants: Mapping[str, np.ndarray]):
    """A copy of the model with the given inputs turned into initializers."""
    from onnx import ModelProto, numpy_helper

    copy = ModelProto()
    copy.CopyFrom(model)
    names = {i.name for i in copy.graph.input}
    for name, value in constants.items():
        if name not in names:
            raise OnnxError(f"constants: the model has no input {name!r}")
        copy.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    kept = [i for i in copy.graph.input if i.name not in constants]
    del copy.graph.input[:]
    copy.graph.input.extend(kept)
    return copy


def _load_model(model_or_path):
    onnx = require_onnx()
    if isinstance(model_or_path, (str, os.PathLike)):
        try:
            return onnx.load(os.fspath(model_or_path))
        except OSError:
            raise
        except Exception as e:
            path = os.fspath(model_or_path)
            raise OnnxError(f"{path}: not a readable ONNX model ({e})") from None
    if not isinstance(model_or_path, onnx.ModelProto):
        kind = type(model_or_path).__name__
        raise OnnxError(f"from_onnx takes a ModelProto or a path, got {kind}")
    return model_or_path


def import_model(
    model_or_path,
    *,
    lengths: Mapping[str, int] | None = None,
    axis_names: Mapping[str, Sequence[str | None]] | None = None,
    constants: Mapping[str, np.ndarray] | None = None,
    symbolic: bool = False,
) -> Imported:
    """The model as an ngrules graph, with its input and output names. With `symbolic`, a
    symbolic dimension of an input not in `lengths` stays symbolic (`dynamic`): rules cannot
    read its length, and `to_onnx` writes it back as a `dim_param`."""
    _load_converters()
    model = _load_model(model_or_path)
    lengths = dict(lengths or {})
    if symbolic:
        lengths = dynamic.with_stand_ins(model, lengths)
    importer = Importer(model, lengths, axis_names or {}, constants or {})
    for vi in importer.graph.input:
        importer.add_input(vi)
    for node in importer.graph.node:
        importer.convert(node)
    names = [o.name for o in importer.graph.output]
    outputs = [importer.output(n) for n in names]
    return Imported(outputs, names, dict(importer.placeholders), importer.naming)


def from_onnx(
    model_or_path,
    *,
    lengths: Mapping[str, int] | None = None,
    axis_names: Mapping[str, Sequence[str | None]] | None = None,
    constants: Mapping[str, np.ndarray] | None = None,
    symbolic: bool = False,
) -> list[Node]:
    """The output nodes of an ngrules graph computing the ONNX model (a ModelProto or a path).

    `lengths` gives the length of each symbolic dimension (`{"batch": 8}`); `axis_names` names
    the dimensions of inputs or initializers (`{"x": ["N", "C", "H", "W"]}`, None to keep the
    default); `constants` fixes inputs at import time (integer inputs that steer shapes, such
    as a Reshape's target). Each output's axes are in the ONNX output's order of dimensions.
    `symbolic` keeps symbolic dimensions without a length symbolic (see `import_model`).
    """
    return import_model(
        model_or_path, lengths=lengths, axis_names=axis_names, constants=constants,
        symbolic=symbolic,
    ).outputs


