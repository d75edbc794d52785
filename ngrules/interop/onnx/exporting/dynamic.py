"""Dynamic dimensions: a model with a symbolic batch or sequence, imported and written back
without fixing its length.

Import: each `dim_param` of a graph input with no length given gets a stand-in length (see
`ir.symbolic`: a prime above every static dimension of the model). Export: every dimension of
a graph input or output whose length is a stand-in gets its `dim_param` back, and every shape
the exporter wrote as a constant (the target of a `Reshape` or an `Expand`) that counts a
stand-in is computed at run time instead, from the `Shape` of an input that has the symbol:
`[N·4, 16]` becomes `Concat(Mul(Shape(x)[0:1], [4]), [16])`; where only one entry of a
Reshape's target counts a symbol it is written -1 instead. `AxisIndex` over a symbolic axis
(a Range to the sequence length, imported) is `Range(0, Shape(x)[i], 1)`, never a constant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ngrules.interop.onnx import OnnxError, ndarrays, proto
from ngrules.interop.onnx.exporting.emitter import Emitter, layout_exporter
from ngrules.interop.onnx.exporting.layout import Value, constant_value, full_value
from ngrules.ir import symbolic
from ngrules.ir.graph import Node

#: Inputs that are shapes, by op: the constants in them are what `restore` computes.
SHAPE_INPUTS = {"Reshape": 1, "Expand": 1}


@layout_exporter("AxisIndex")
def _axis_index(em: Emitter, n: Node) -> Value:
    """0..n-1 along an axis: a constant when its length is static, else computed from the
    run-time shape of the tensor that has the axis."""
    axis = n.attrs["axis"]
    if not symbolic.symbols_of(axis.length):
        return constant_value(np.arange(axis.length, dtype=np.int64), (axis,))
    length = em.node("Squeeze", [_run_time_length(em, n), em.const([0])])
    return full_value(em.node("Range", [em.const(0), length, em.const(1)]), (axis,))


def _run_time_length(em: Emitter, index: Node) -> str:
    """The length of an AxisIndex's symbolic axis as a 1-D value: the Shape of the tensor
    that has it, read at run time."""
    x, axis = index.args[0], index.attrs["axis"]
    v = em.values[x]
    if not v.full(axis):
        v = em.complete(x, (axis,))
    i = v.dims.index(axis)
    return em.node("Shape", [em.name_of(v)], start=i, end=i + 1)


def slice_back(em: Emitter, n: Node, args: Sequence[str]) -> str | None:
    """A Gather that a model's Slice to a symbolic length became (`symbolic_slices`), as that
    Slice: from 0 to the run-time length along the gathered axis; None for any other Gather."""
    from ngrules.interop.onnx.importing.symbolic_slices import SLICED, positions

    slicing = getattr(em, "target", em.opset) >= 10  # a Slice reads its bounds as inputs
    inputs = SLICED.get(n) if slicing else None
    index = positions(n) if inputs else None
    if index is None or not symbolic.symbols_of(index.attrs["axis"].length):
        return None
    axis = n.args[0].axes.index(n.attrs["axis"])
    bounds = [em.const([0]), _run_time_length(em, index)]
    if inputs > 3 or axis:
        bounds.append(em.const([axis]))
    if inputs > 4:
        bounds.append(em.const([1]))
    return em.node("Slice", [args[0], *bounds])


def run_time_constant(placeholders, value: np.ndarray, axes) -> Node | None:
    """A shape folded at import that counts stand-ins (the `Shape` of an input, which a model
    then does arithmetic on) as a node computing it at run time: each symbol the count of the
    input's axis of its length; None when an element cannot be (a symbol no input has)."""
    from ngrules.ir import builders as F
    from ngrules.ir.axes import Axes

    axes = Axes(tuple(axes))
    if value.dtype.kind not in "iu" or value.size > 8 or len(axes) > 1:
        return None
    total = None
    for i, v in enumerate(value.ravel().tolist()):
        element = _run_time_scalar(placeholders, int(v), value.dtype)
        if element is None:
            return None
        if value.size > 1:  # placed at i of the 1-D value
            unit = np.zeros(value.size, value.dtype)
            unit[i] = 1
            element = F.broadcast(element, axes) * F.constant(unit, axes, dtype=value.dtype)
        total = element if total is None else total + element
    return F.broadcast(total, axes)


def _run_time_scalar(placeholders, v: int, dtype) -> Node | None:
    from ngrules.ir import builders as F
    from ngrules.ir.axes import Axes

    static, symbols = symbolic.factor(abs(v))
    if not symbols:
        return None if abs(v) >= symbolic.FIRST_STAND_IN else F.constant(v, dtype=dtype)
    node = None
    for symbol in symbols:
        length = symbolic.stand_in(symbol)
        axis = next((a for p in placeholders for a in p.axes if a.length == length), None)
        if axis is None:
            return None
        count = F.sum(F.broadcast(F.constant(1, dtype=dtype), Axes((axis,))), out_axes=())
        node = count if node is None else node * count
    factor = static * (-1 if v < 0 else 1)
    return node if factor == 1 else node * F.constant(factor, dtype=dtype)


def with_stand_ins(model, lengths: Mapping[str, int]) -> dict[str, int]:
    """`lengths`, plus a stand-in for each symbolic dimension of a graph input not in it."""
    graph = model.graph
    longest = 1
    for init in graph.initializer:
        longest = max([longest, *init.dims])
    params: list[str] = []
    inputs = len(graph.input)
    for k, vi in enumerate([*graph.input, *graph.value_info, *graph.output]):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                longest = max(longest, d.dim_value)
            elif d.HasField("dim_param") and k < inputs and d.dim_param not in params:
                params.append(d.dim_param)
    out = dict(lengths)
    for p in params:
        if p not in out:
            out[p] = symbolic.stand_in(p, above=longest)
    return out


def _dim_label(length: int) -> str | None:
    static, symbols = symbolic.factor(length)
    if not symbols:
        return None
    return "*".join(symbols + ([str(static)] if static != 1 else []))


def _relabel(value_infos) -> None:
    """Dimensions of stand-in lengths as `dim_param`s (`N`, or `N*4` for a flattening)."""
    for vi in value_infos:
        for d in vi.type.tensor_type.shape.dim:
            label = _dim_label(d.dim_value) if d.HasField("dim_value") else None
            if label is not None:
                d.dim_param = label


class _Shapes:
    """Nodes computing shapes at run time, from the inputs that hold each symbol."""

    def __init__(self, sources: Sequence[tuple[str, Sequence[int]]], prefix: str,
                 initializers: list | None = None, read: Mapping[tuple, str] | None = None):
        self.where: dict[str, tuple[str, int]] = {}  # symbol -> (input, position)
        for name, lengths in sources:
            for i, length in enumerate(lengths):
                symbol = symbolic.STAND_INS.get(length)
                if symbol is not None:
                    self.where.setdefault(symbol, (name, i))
        self.nodes: list = []
        self.initializers = initializers  # where static parts go (a function: Constant nodes)
        self.prefix = prefix
        self.read = read or {}  # (input, start, end) -> a Shape the graph has already
        self._dims: dict[str, str] = {}
        self._count = 0

    def _fresh(self) -> str:
        self._count += 1
        return f"{self.prefix}{self._count}"

    def _node(self, op: str, inputs: list[str], **attrs) -> str:
        out = self._fresh()
        self.nodes.append(proto.make_node(op, inputs, [out], **attrs))
        return out

    def _const(self, values) -> str:
        out = self._fresh()
        if self.initializers is not None:
            self.initializers.append(ndarrays.from_array(np.asarray(values, np.int64), out))
            return out
        tensor = ndarrays.from_array(np.asarray(values, np.int64), out + "_v")
        self.nodes.append(proto.make_node("Constant", [], [out], value=tensor))
        return out

    def _dim(self, symbol: str) -> str:
        if symbol not in self._dims:
            name, i = self.where[symbol]
            self._dims[symbol] = self.read.get((name, i, i + 1)) or self._node(
                "Shape", [name], start=i, end=i + 1)
        return self._dims[symbol]

    def can(self, values: np.ndarray) -> bool:
        return all(s in self.where for v in values.ravel() for s in symbolic.factor(int(v))[1])

    def shape(self, values: np.ndarray) -> str:
        """A 1-D int64 tensor of `values`, each stand-in factor read at run time."""
        parts: list[str] = []
        run: list[int] = []
        for v in values.ravel().tolist():
            static, symbols = symbolic.factor(int(v))
            if not symbols:
                run.append(v)
                continue
            if run:
                parts.append(self._const(run))
                run = []
            term = self._dim(symbols[0])
            for s in symbols[1:]:
                term = self._node("Mul", [term, self._dim(s)])
            if static != 1:
                term = self._node("Mul", [term, self._const([static])])
            parts.append(term)
        if run:
            parts.append(self._const(run))
        return parts[0] if len(parts) == 1 else self._node("Concat", parts, axis=0)


def _symbolic_constants(nodes, constants: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The constant shape inputs (by name) that count a stand-in."""
    found = {}
    for node in nodes:
        i = SHAPE_INPUTS.get(node.op_type)
        if i is None or len(node.input) <= i:
            continue
        name = node.input[i]
        value = constants.get(name)
        if value is not None and value.dtype.kind == "i" and any(
            symbolic.factor(int(v))[1] for v in value.ravel()
        ):
            found[name] = value
    return found


def _rewired(nodes, shapes: _Shapes, found: Mapping[str, np.ndarray]) -> list:
    """The nodes with each symbolic shape input replaced by its run-time computation (one per
    distinct shape), or, for a Reshape whose target counts a symbol in one entry only and has
    no -1 already (a model's own `view(-1, seq)`), by the target with -1 there (no node)."""
    by_value: dict[tuple, str] = {}
    for node in nodes:
        i = SHAPE_INPUTS.get(node.op_type)
        if i is None or len(node.input) <= i or node.input[i] not in found:
            continue
        value = found[node.input[i]]
        symbolic_entries = [bool(symbolic.factor(int(v))[1]) for v in value.ravel()]
        if node.op_type == "Reshape" and sum(symbolic_entries) == 1 and -1 not in value:
            target = np.where(symbolic_entries, -1, value.ravel())
            key = ("-1", *target.tolist())
            if key not in by_value:
                by_value[key] = shapes._const(target)
        elif shapes.can(value):
            key = tuple(value.ravel().tolist())
            if key not in by_value:
                by_value[key] = shapes.shape(value)
        else:
            continue
        node.input[i] = by_value[key]
    return [*shapes.nodes, *nodes]


def _constant_nodes(nodes) -> dict[str, np.ndarray]:
    out = {}
    for node in nodes:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            out[node.output[0]] = ndarrays.to_array(node.attribute[0].t)
    return out


def restore(model, arrays: Mapping[str, np.ndarray] | None = None) -> None:
    """Give the model its symbolic dimensions back (in place; nothing to do without any);
    `arrays` are its initializers kept apart, checked too."""
    if not symbolic.STAND_INS:
        return
    for name, array in [*(arrays or {}).items(),
                        *((t.name, t.dims) for t in model.graph.initializer)]:
        dims = array.shape if isinstance(array, np.ndarray) else tuple(array)
        if held := symbolic.symbols_of(tuple(int(d) for d in dims)):
            symbol = held[0]
            raise OnnxError(f"cannot keep {symbol!r} symbolic: the constant {name!r} would have "
                            f"its stand-in length {tuple(dims)} (give its length: --length "
                            f"{symbol}=N)")
    graph = model.graph
    sources = [(vi.name, [d.dim_value for d in vi.type.tensor_type.shape.dim])
               for vi in graph.input]
    ranks = dict(sources)
    held = any(symbolic.symbols_of(d) for _, dims in sources for d in dims)
    read = _shared_input_shapes(graph, ranks) if held else {}
    constants = {t.name: ndarrays.to_array(t) for t in graph.initializer}
    constants.update(_constant_nodes(graph.node))
    found = _symbolic_constants(graph.node, constants)
    if found:
        added: list = []
        nodes = _rewired(list(graph.node), _Shapes(sources, "dyn_shape", added, read), found)
        # the inputs' Shapes first: the new shapes read the model's
        nodes.sort(key=lambda n: _input_shape(n, ranks) is None)
        del graph.node[:]
        graph.node.extend(nodes)
        used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
        kept = [t for t in [*graph.initializer, *added] if t.name in used]
        del graph.initializer[:]
        graph.initializer.extend(kept)
    symbols = {s for vi in [*graph.input, *graph.output]
               for d in vi.type.tensor_type.shape.dim for s in symbolic.symbols_of(d.dim_value)}
    _relabel(graph.input)
    _relabel(graph.output)
    _check_no_stand_ins(graph.node, {t.name: t for t in graph.initializer}, symbols)


def _input_shape(node, ranks: Mapping[str, Sequence[int]]) -> tuple | None:
    """(input, start, end) of a Shape node of a graph input, its bounds resolved."""
    if node.op_type != "Shape" or node.domain not in ("", "ai.onnx") or \
            node.input[0] not in ranks:
        return None
    rank = len(ranks[node.input[0]])
    attrs = {a.name: proto.get_attribute_value(a) for a in node.attribute}
    start, end = (min(max(v + rank if v < 0 else v, 0), rank)
                  for v in (attrs.get("start", 0), attrs.get("end", rank)))
    return node.input[0], start, end


def _shared_input_shapes(graph, ranks: Mapping[str, Sequence[int]]) -> dict[tuple, str]:
    """Shapes of graph inputs (the model's, and those the exporter wrote for a symbolic
    length) read from one node each, placed first (they read inputs only); those nodes'
    outputs by (input, start, end), for `_Shapes` to read rather than write them again."""
    outputs = {o.name for o in graph.output}
    read: dict[tuple, str] = {}
    renamed: dict[str, str] = {}
    shapes, rest = [], []
    for node in graph.node:
        for i, x in enumerate(node.input):
            node.input[i] = renamed.get(x, x)
        key = _input_shape(node, ranks)
        if key is None:
            rest.append(node)
        elif key in read and node.output[0] not in outputs:
            renamed[node.output[0]] = read[key]
        else:
            read.setdefault(key, node.output[0])
            shapes.append(node)
    if shapes:
        del graph.node[:]
        graph.node.extend(shapes + rest)
    return read


#: A stand-in length, or one a few steps from it (a symbolic axis concatenated with a static
#: one), left as a value would be a wrong model at any other length.
_NEAR = 1 << 16


def _stand_in_near(values: np.ndarray, symbols: set[str]) -> tuple[int, str] | None:
    """A value holding (or a few steps from) the stand-in of one of `symbols`, the model's."""
    for v in values.ravel().tolist():
        held = [s for s in symbolic.symbols_of(abs(v)) if s in symbols] if v else []
        if held:
            return v, held[0]
        near = [(abs(abs(v) - length), symbol) for length, symbol in symbolic.STAND_INS.items()
                if symbol in symbols]
        if near and min(near)[0] <= _NEAR:
            return v, min(near)[1]
    return None


def _check_no_stand_ins(nodes, initializers, symbols: set[str]) -> None:
    """Refuse (naming the reader) a small integer constant left holding a stand-in length of
    one of the model's `symbols` (those of its inputs and outputs; a static length near the
    stand-in of a symbol of another model is no such value): a converter that used a symbolic
    length as a value, which no run-time shape replaced."""
    if not symbols:
        return
    constants = dict(_constant_nodes(nodes))
    for name, tensor in initializers.items():
        if tensor.data_type in (6, 7) and np.prod(tensor.dims) <= 4096:  # int32, int64
            constants[name] = ndarrays.to_array(tensor)
    bad = {}
    for name, value in constants.items():
        if value.dtype.kind == "i" and value.size <= 4096:
            found = _stand_in_near(value, symbols)
            if found:
                bad[name] = found
    for node in nodes:
        for name in node.input:
            if name in bad:
                value, symbol = bad[name]
                raise OnnxError(
                    f"cannot keep {symbol!r} symbolic here: the {node.op_type} node writing "
                    f"{node.output[0]!r} would read {value}, a value computed from its "
                    f"stand-in length (give its length: --length {symbol}=N)")


def restore_function(function, input_lengths: Sequence[Sequence[int]]) -> None:
    """The same for an ONNX function whose inputs have these (stand-in) lengths."""
    if not symbolic.STAND_INS:
        return
    nodes = list(function.node)
    found = _symbolic_constants(nodes, _constant_nodes(nodes))
    if found:
        sources = list(zip(function.input, input_lengths))
        rewired = _rewired(nodes, _Shapes(sources, "dyn_shape"), found)
        del function.node[:]
        function.node.extend(rewired)
