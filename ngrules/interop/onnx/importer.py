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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ngrules.interop.onnx import (
    OnnxError,
    ShapeMismatch,
    UnsupportedOp,
    ndarrays,
    proto,
    weights,
)
from ngrules.interop.onnx.budget import DEFAULT_BUDGET, Budget, Meter
from ngrules.interop.onnx.composites import whole
from ngrules.interop.onnx.exporting import as_read, dynamic
from ngrules.interop.onnx.exporting.writers import origins
from ngrules.interop.onnx.importing import recipes, symbolic_slices
from ngrules.interop.onnx.importing.axes import Naming, name_axes
from ngrules.interop.onnx.importing.context import (
    CONVERTERS,
    DOMAINS,
    INPUT_ORDER,
    Context,
    elem_name,
    graph_dtype,
)
from ngrules.interop.onnx.importing.folding import Folding, np_elem
from ngrules.interop.onnx.importing.loading import DEFAULT_LIMITS, Limits, check_model, read_model
from ngrules.interop.onnx.importing.shaping import Tensor, conform
from ngrules.ir import builders as F
from ngrules.ir.filebytes import FileBytes, root
from ngrules.ir.graph import Node, paused_gc


def supported_ops() -> list[str]:
    _load_converters()
    return sorted(CONVERTERS)


def _load_converters() -> None:
    import ngrules.interop.onnx.importing.converters  # noqa: F401


@dataclass
class Imported:
    """An imported model: output nodes (ONNX's order of axes), input and output names."""

    outputs: list[Node]
    output_names: list[str]
    inputs: dict[str, Node] = field(default_factory=dict)
    naming: Naming | None = None
    opset: int | None = None  # the model's standard-domain opset
    #: the file's bytes its weights view (`ir.filebytes`), which a caller that reads none of
    #: these nodes again may give to the rewrite of them (`rewrite(..., spend=...)`)
    spendable: FileBytes | None = None


class Importer:
    def __init__(self, model, lengths: Mapping[str, int], axis_names, constants,
                 limits: Limits = DEFAULT_LIMITS, arrays: Mapping[str, np.ndarray] | None = None,
                 meter: Meter | None = None):
        arrays = arrays or {}
        model = _bind_constants(model, constants, arrays) if constants else model
        self.meter = meter or Meter()
        self.folding = Folding(model, lengths, limits, arrays, self.meter)
        self.shapes = self.folding.shapes
        self.graph = self.shapes.model.graph
        self.opset = next(
            (o.version for o in self.shapes.model.opset_import if o.domain in ("", "ai.onnx")), 1
        )
        self.consts: dict[str, np.ndarray] = self.folding.consts
        self.values: dict[str, Tensor] = {}
        self.placeholders: dict[str, Node] = {}
        #: LSTM, GRU and RNN unrolled into primitives rather than one op each.
        self.unroll_recurrent = False
        #: ONNX ops with no ngrules op of their name kept whole as composites (`composites`).
        self.composites = True
        #: the values some node or the graph's outputs read.
        self.used = {i for n in self.graph.node for i in n.input} | \
            {o.name for o in self.graph.output}
        self._made_by: dict | None = None  # value -> the node computing it
        self._check_inference()
        self.naming = name_axes(self.shapes, self.consts, axis_names)

    def _check_inference(self) -> None:
        """A node onnx's strict shape inference rejects, of an op the importer converts, is an
        inconsistent model: one line naming the node (ops it refuses are refused later)."""
        for op, name, message in self.shapes.errors:
            if op in CONVERTERS:
                name = name or next((n.name for n in self.graph.node if n.op_type == op), "")
                where = f"{op} node {name!r}" if name else f"a {op} node"
                raise OnnxError(f"{where} does not fit its inputs (shape inference: {message})")

    # -- values -------------------------------------------------------------------------------
    def tensor(self, name: str, ctx: Context | None = None) -> Tensor:
        if name in self.values:
            return self.values[name]
        if name in self.consts:
            value = self.consts[name]
            where = ctx.label if ctx else "the graph"
            if graph_dtype(np_elem(value.dtype)) is None:
                raise UnsupportedOp(f"{where}: {value.dtype} tensor {name!r} is not supported")
            if value.size == 0:
                raise UnsupportedOp(f"{where}: {name!r} has a dimension of length 0 {value.shape}")
            axes = self.naming.axes(name)
            node = self._symbolic(name, value, axes)
            if name in self.values:  # converted by `_symbolic`
                return self.values[name]
            t = Tensor(node or F.constant(value, axes, dtype=value.dtype), axes)
            self.values[name] = t
            return t
        raise OnnxError(f"value {name!r} is used before it is computed")

    def _symbolic(self, name: str, value: np.ndarray, axes) -> Node | None:
        """A value folded from a symbolic length and used as data (a model's arithmetic on
        its sequence length): computed at run time, a `Shape` from the inputs' axes, the
        nodes after it by their converters."""
        if name not in self.folding.symbolic:
            return None
        producer = self._producers().get(name)
        if producer is not None and producer.op_type != "Shape":
            del self.consts[name]  # converted, not folded, this once
            try:
                self._translate(producer)
            finally:
                self.consts[name] = value
            return self.values[name].ordered() if name in self.values else None
        node = dynamic.run_time_constant(self.placeholders.values(), value, axes)
        if node is None:
            raise UnsupportedOp(f"{name!r} = {np.ravel(value)[:4]} is computed from a symbolic "
                                "length and used as data (give the lengths with --length)")
        return node

    def _producers(self) -> dict:
        if self._made_by is None:
            self._made_by = {o: n for n in self.folding.base.graph.node for o in n.output}
        return self._made_by

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
        INPUT_ORDER[node] = len(self.placeholders)
        self.placeholders[vi.name] = node
        self.values[vi.name] = Tensor(node, axes)

    # -- nodes --------------------------------------------------------------------------------
    def convert(self, node) -> None:
        self.meter.check_time(f"converting {node.op_type} node {node.name or node.output[:1]!r}")
        if self.folding.foldable(node):  # left by the last round of folding
            self.folding.fold(node)
            return
        self._translate(node)

    def _translate(self, node) -> None:
        fn = CONVERTERS.get(node.op_type)
        ctx = Context(self, node)
        if fn is None or node.domain not in DOMAINS[node.op_type]:
            raise UnsupportedOp(
                f"unsupported ONNX op {node.op_type} (node {node.name or node.output[0]!r}); "
                f"supported: {', '.join(sorted(CONVERTERS))}"
            )
        kept = whole.convert(self, node, self.used) if self.composites else None
        try:
            outs = fn(ctx) if kept is None else kept
        except ShapeMismatch as e:
            raise ShapeMismatch(f"{ctx.label}: {e.message}") from None
        for i, t in enumerate(outs):
            if t is None or i >= len(node.output) or not node.output[i]:
                continue
            got = tuple(t.axes) if isinstance(t, Node) else None
            if not self.shapes.known(node.output[i]):  # inference left it open (the mask
                t = Tensor(t, got) if got is not None else t  # of an old Dropout): the
                self.values[node.output[i]] = t  # converter's axes stand
                continue
            want = ctx.out_axes(i)
            t = Tensor(t, self._positional(got, want)) if got is not None else t
            self.values[node.output[i]] = conform(t, want)

    @staticmethod
    def _positional(got, want):
        """Axes for a bare node from a converter: its own order, when the names are not
        already those of the output (then any order matching by name)."""
        if {a.name for a in got} == {a.name for a in want}:
            return want
        return got

    def output(self, name: str) -> Node:
        """A graph output, its axes in ONNX's order."""
        return self.tensor(name).ordered()


def _bind_constants(model, constants: Mapping[str, np.ndarray], weights: Iterable[str] = ()):
    """A copy of the model with the given inputs turned into initializers (not the inputs that
    stand for `weights` left out of the model)."""
    copy = proto.ModelProto()
    copy.CopyFrom(model)
    names = {i.name for i in copy.graph.input} - set(weights)
    for name, value in constants.items():
        if name not in names:
            raise OnnxError(f"constants: the model has no input {name!r}")
        copy.graph.initializer.append(ndarrays.from_array(np.asarray(value), name))
    kept = [i for i in copy.graph.input if i.name not in constants]
    del copy.graph.input[:]
    copy.graph.input.extend(kept)
    return copy


def _load_model(model_or_path, limits: Limits, meter: Meter | None = None,
                meanwhile: Callable[[], object] | None = None):
    """The model, read from its file when given a path, and checked, without its large
    weights; and those weights as arrays sharing the file's (or serialised model's) bytes.
    `meanwhile()` runs while the file is read (first, given a ModelProto)."""
    meter = meter or Meter()
    if not isinstance(model_or_path, (str, os.PathLike)) and meanwhile is not None:
        meanwhile()
    if isinstance(model_or_path, (str, os.PathLike)):  # onnx loaded while the file is read
        model, arrays = read_model(model_or_path, limits, meter, meanwhile)
        where = os.fspath(model_or_path)
    elif isinstance(model_or_path, proto.ModelProto):
        model, arrays, where = model_or_path, {}, "the model"
        try:
            data = model.SerializeToString()
        except Exception:  # past protobuf's 2 GB: the checker says what is wrong
            data = None
        if data is not None:
            model, arrays = weights.split(data, where, meter)
    else:
        kind = type(model_or_path).__name__
        raise OnnxError(f"from_onnx takes a ModelProto or a path, got {kind}")
    meter.check(model.ByteSize(), "onnx's checker")  # which serialises the model
    check_model(model, where)
    return model, arrays


def symbolic_dims(model_or_path) -> set[str]:
    """The names of the model's symbolic dimensions (the `dim_param`s of its values)."""
    graph = _load_model(model_or_path, DEFAULT_LIMITS)[0].graph
    values = [*graph.input, *graph.output, *graph.value_info]
    return {d.dim_param for v in values for d in v.type.tensor_type.shape.dim if d.dim_param}


def import_model(
    model_or_path,
    *,
    lengths: Mapping[str, int] | None = None,
    axis_names: Mapping[str, Sequence[str | None]] | None = None,
    constants: Mapping[str, np.ndarray] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    symbolic: bool = False,
    unroll_recurrent: bool = False,
    budget: Budget = DEFAULT_BUDGET,
    keep_whole: bool = True,
) -> Imported:
    """The model as an ngrules graph, with its input and output names. `limits` bounds the
    model file's size and every constant computed while importing (`loading.Limits`). With
    `symbolic`, a symbolic dimension of an input not in `lengths` stays symbolic (`dynamic`):
    rules cannot read its length, and `to_onnx` writes it back as a `dim_param`. LSTM, GRU and
    RNN are one node each (the op table's ops of those names) unless `unroll_recurrent` asks
    for them unrolled into primitives over their sequence (differentiable, seen by rules).
    `budget` bounds the whole import: the bytes it reads and folds, and its time (see
    `interop.onnx.budget`). An ONNX op with no ngrules op of its name is one composite node
    (`composites`) unless `keep_whole` is False: then it is read as the primitives of its body.
    The cyclic garbage collector is paused meanwhile (`paused_gc`: the graph is acyclic; its
    full scans of the live objects cost ResNet-50's import a fifth of its time)."""
    with paused_gc():
        return _import(model_or_path, lengths, axis_names, constants, limits, symbolic,
                       unroll_recurrent, budget, keep_whole)


def _import(model_or_path, lengths, axis_names, constants, limits: Limits, symbolic: bool,
            unroll_recurrent: bool, budget: Budget, keep_whole: bool) -> Imported:
    meter = Meter(budget, "import")
    model, arrays = _load_model(model_or_path, limits, meter, meanwhile=_load_converters)
    lengths = dict(lengths or {})
    if symbolic:
        lengths = dynamic.with_stand_ins(model, lengths)
    importer = Importer(model, lengths, axis_names or {}, constants or {}, limits, arrays, meter)
    importer.unroll_recurrent = unroll_recurrent
    importer.composites = keep_whole
    for vi in importer.graph.input:
        importer.add_input(vi)
    for node in importer.graph.node:
        importer.convert(node)
    names = [o.name for o in importer.graph.output]
    outputs = [importer.output(n) for n in names]
    opset = importer.folding.opset  # the model's default-domain opset, or None
    origins.record(importer, names, outputs, opset)  # outputs folded: the nodes that made them
    recipes.record(importer, opset)  # values folded: the nodes that made them
    symbolic_slices.record(importer)  # Slices to a symbolic length: written back as Slices
    as_read.remember(importer, model, arrays, outputs)  # for the exporter: inputs, refusals
    spendable = next((b for a in arrays.values() if isinstance(b := root(a), FileBytes)), None)
    return Imported(outputs, names, dict(importer.placeholders), importer.naming, opset,
                    spendable)


def from_onnx(model_or_path, **options) -> list[Node]:
    """The output nodes of an ngrules graph computing the ONNX model (a ModelProto or a path);
    `options` are `import_model`'s.

    `lengths` gives the length of each symbolic dimension (`{"batch": 8}`); `axis_names` names
    the dimensions of inputs or initializers (`{"x": ["N", "C", "H", "W"]}`, None to keep the
    default); `constants` fixes inputs at import time (integer inputs that steer shapes, such
    as a Reshape's target). Each output's axes are in the ONNX output's order of dimensions.
    `symbolic` keeps symbolic dimensions without a length symbolic (see `import_model`).
    """
    return import_model(model_or_path, **options).outputs


