"""ONNX ops kept whole: a node whose op has no ngrules op of its name is read as one composite
node (`ir.composite`) of that name, not as the primitives its converter writes.

The composite's `spec` is the ONNX node as protobuf text, inside a graph that also holds the
import-time constants its converter reads (a Reshape's target, pads, axes: initializers named
`k<i>` for input i); its inputs are renamed `a<k>` for argument k of the composite, `c<i>` for
such a constant, and it keeps one output. Its body is the converter run again on a context
(`BodyContext`) that answers from the node: the arguments given, the constants, the output's
axes and dtype, the model's opset. So the body is what the importer wrote before, and the
exporter writes the node back as it was read (converted by onnx's version converter when the
export's opset is not the node's, the body when that fails).

An ONNX op whose name an ngrules op has is kept whole as `Onnx<Op>` (`OnnxSum`, `OnnxMax`),
unless its converter wrote one node of that ngrules op (`Add`, `Exp`, `Relu`: their own
primitives). A node stays lowered when its op is in `LOWERED`, its converter wrote only views
(`Reshape`, `Squeeze`, `Transpose`: the exporter lays those out), no output is read, a constant
it reads holds more than `CONST_LIMIT` elements, or its converter fails on the recording run
(the ordinary conversion then says why). An op whose converter gives back an input as it is
(`Dropout`, a default `Clip`, a one-input `Max`) is kept whole, so the round trip writes it;
`decompose_simple` lowers it to that input, and `recompose` never makes it again.
"""

from __future__ import annotations

import functools
import weakref
from types import SimpleNamespace

import numpy as np

from ngrules.interop.onnx import OnnxError, ndarrays, proto
from ngrules.interop.onnx.composites.specs import graph_of, text_of
from ngrules.interop.onnx.exporting.passes.downgrade import AS_READ
from ngrules.interop.onnx.importing.context import (
    CONVERTERS,
    READ_TRANSPOSED,
    Context,
    graph_dtype,
    transposed_pair,
)
from ngrules.interop.onnx.importing.folding import np_elem
from ngrules.interop.onnx.importing.shaping import Tensor, conform, temp_axis
from ngrules.ir import builders as F
from ngrules.ir import composite
from ngrules.ir.graph import Node, make_node
from ngrules.ir.ops import OPS

#: The most elements the import-time constants one composite reads may hold together.
CONST_LIMIT = 4096

#: Ops read as their primitives even though they have no ngrules op of their name: their
#: converters write nothing (folded, or the input itself) or steer other nodes.
LOWERED = frozenset({"Constant", "Shape", "Size", "ConstantOfShape", "Range",
                     "EyeLike", "Optional", "OptionalGetElement", "OptionalHasElement",
                     "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                     "Bernoulli", "Multinomial", "If", "Loop", "Scan",
                     # one op each already, unrolled on request (`unroll_recurrent`)
                     "LSTM", "GRU", "RNN"})

#: Ops kept whole where their converter writes views only (an Einsum that transposes, a Tile,
#: a SpaceToDepth): the round trip writes them back. `decompose_simple` lowers them, so the
#: shipped pipelines see their views as before. Any other op writing views only (ONNX's
#: Reshape, Squeeze, Transpose; a GatherND reading in order) stays those views, which the
#: exporter lays out, with the views around them, as the fewest nodes it can.
MOVES_DATA = frozenset({"Einsum", "Tile", "SpaceToDepth", "DepthToSpace"})

#: Ops whose body the exporter writes back as the op in any order of its operands
#: (`forms`, `products`): where an operand is not in ONNX's order, the body is written.
RAISED = frozenset({"LayerNormalization", "BatchNormalization", "OnnxGelu", "OnnxLogSoftmax",
                    "LogSoftmax", "Gemm", "MatMul", "Einsum"})

#: Ops kept whole though their converter writes one primitive of their name: its writer
#: cannot write every case they read (BitShift on signed integers, BitCast before opset 26).
WHOLE = frozenset({"BitShift", "BitCast"})

#: Ops that before opset 13 normalise over every dimension from their axis on: where that is
#: more than one dimension the exporter cannot write the primitive as one node of today's op,
#: so a model's node of an older opset is kept whole (written back as read at its opset).
FLATTENING = frozenset({"Softmax", "LogSoftmax", "Hardmax"})

#: ONNX op names the shipped rules declare ops of (`op Gelu` in nn.rules): their composites
#: are `Onnx<Op>` whether or not the rules are loaded yet.
RESERVED = frozenset({"Gelu"})


class _Recording(Context):
    """The importer's context, noting which inputs the converter reads as tensors and which
    as import-time constants."""

    def __init__(self, importer, node):
        super().__init__(importer, node)
        self.tensors: set[int] = set()
        self.constants: set[int] = set()

    def x(self, i: int) -> Tensor:
        self.tensors.add(i)
        return super().x(i)

    def const(self, i: int):
        value = super().const(i)
        if value is not None:
            self.constants.add(i)
        return value


class BodyContext(Context):
    """A composite node's context: its converter, run again, writes its body on `args`."""

    def __init__(self, node: Node, args):
        graph, outputs, shapes, self.orders = _read_spec(node.attrs["spec"])
        importer = SimpleNamespace(
            opset=node.attrs["opset"], unroll_recurrent=False,
            shapes=SimpleNamespace(known=lambda name: True),
            folding=SimpleNamespace(check_size=lambda *a: None),
        )
        super().__init__(importer, graph.node[0])
        self.args = args
        self.values = _constants(graph)
        self.index = node.attrs["output"]
        self.axes = positional(node, outputs[self.index])  # ONNX's order
        self.dtype = node.attrs["dtype"]
        self.shapes = shapes

    def x(self, i: int) -> Tensor:
        name = self.node.input[i]
        if not name.startswith("a"):
            raise OnnxError(f"{self.label}: input {i} is not one of the composite's arguments")
        arg = self.args[int(name[1:])]
        return Tensor(arg, positional(arg, self.orders[name]))

    def const(self, i: int):
        return self.values.get(i) if self.has(i) else None

    def out_axes(self, i: int = 0):
        if i == self.index:
            return self.axes
        return tuple(temp_axis(d.dim_value) for d in self.shapes[i].shape.dim)

    def out_shape(self, i: int = 0):
        return tuple(a.length for a in self.out_axes(i))

    def out_dtype(self, i: int = 0):
        return self.dtype if i == self.index else graph_dtype(self.shapes[i].elem_type)


@functools.lru_cache(maxsize=1024)
def _read_spec(text: str) -> tuple:
    """A spec's graph, its outputs' orders and types by index and its inputs' orders by
    name: read once per spec (a network's layers share a few), not once per body."""
    graph = graph_of(text)
    outputs = {int(v.name[1:]): v for v in graph.output}
    return (graph, {i: _perm(v) for i, v in outputs.items()},
            {i: v.type.tensor_type for i, v in outputs.items()},
            {v.name: _perm(v) for v in graph.input})


def _perm(value_info) -> tuple[int, ...]:
    """The order of a value's dimensions in ONNX as positions in its node's axes."""
    return tuple(int(p) for p in value_info.doc_string.split())


def positional(node: Node, perm) -> tuple:
    """The node's axes in ONNX's order of dimensions."""
    return tuple(node.axes[p] for p in perm)


def _order(node: Node, axes) -> str:
    """`axes` (ONNX's order) as positions in node's axes, as text (node's own order when they
    are not a reordering of its axes)."""
    names = [a.name for a in node.axes]
    if sorted(a.name for a in axes) != sorted(names):
        return " ".join(map(str, range(len(names))))
    return " ".join(str(names.index(a.name)) for a in axes)


def _constants(graph) -> dict[int, np.ndarray]:
    return {int(t.name[1:]): ndarrays.to_array(t) for t in graph.initializer}


def _result(outs, want, i: int = 0) -> Tensor:
    """The converter's output i as a tensor of the output's axes (as the importer does)."""
    t = outs[i]
    if isinstance(t, Node):
        got = tuple(t.axes)
        t = Tensor(t, want if {a.name for a in got} == {a.name for a in want} else got)
    return conform(t, want)


def build(node: Node, args) -> Node:
    """The composite's body on `args`: its converter run on a `BodyContext`."""
    import ngrules.interop.onnx.importing.converters  # noqa: F401  (a graph file's op: not loaded yet)

    ctx = BodyContext(node, tuple(args))
    out = _result(CONVERTERS[ctx.op](ctx), ctx.axes, ctx.index)
    return F.axes_with_order(out.node, node.axes)


def op_name(onnx_op: str) -> str:
    """The composite op standing for an ONNX op: its name, or `Onnx<Op>` when an ngrules op
    has that name (ONNX's variadic `Sum`, `Max`; `Flatten`, `Transpose` written as views)."""
    if composite.is_composite(onnx_op) or (onnx_op not in OPS and onnx_op not in RESERVED):
        return onnx_op
    return "Onnx" + onnx_op


def declare(name: str) -> None:
    """Make `name` a composite op of this process (a graph file holds nodes of it)."""
    if name.isidentifier() and name[:1].isupper() and name not in OPS:
        _make_op(name)


def _make_op(name: str) -> None:
    composite.register_composite(name, build, doc="an ONNX op kept whole (its body: the "
                                 "primitives the importer writes for it)")


def _one_primitive(op: str, results: dict, args) -> bool:
    """Whether the converter wrote one node of the ngrules op of the ONNX op's name (views
    aside): such a node stays that primitive."""
    if len(results) != 1:
        return False
    computing = composite.computing(next(iter(results.values()))[1], args, limit=2)
    return len(computing) == 1 and computing[0].op == op


def _passed(result: Node, axes, given) -> bool:
    """Whether the converter gave back an input as it is, in the same order of dimensions (a
    Transpose is a view the exporter lays out), computed at run time or a scalar constant (a
    larger constant passed through, a weight's Identity, stays that constant: its readers fold
    over it at import)."""
    return any(t.node is result and tuple(t.axes) == tuple(axes) for t in given) and bool(
        result.args or result.op == "Placeholder" or result.axes.size <= 1)


def convert(importer, node, used: set[str]) -> list | None:
    """The node as one composite (a list of output tensors), or None to convert it as usual."""
    op = node.op_type
    if op in LOWERED or op not in CONVERTERS:
        return None
    kept = [i for i, name in enumerate(node.output) if name and name in used]
    if not kept:
        return None
    ctx = _Recording(importer, node)
    try:
        outs = CONVERTERS[op](ctx)
        results = {i: (ctx.out_axes(i), _result(outs, ctx.out_axes(i), i).node) for i in kept}
    except Exception:  # noqa: BLE001  the ordinary conversion says why
        return None
    name = op_name(op)
    args = [importer.tensor(node.input[i]).node for i in ctx.tensors]
    given = [importer.tensor(node.input[i]) for i in ctx.tensors]
    if op not in MOVES_DATA and not any(
            composite.computing(r, args, limit=1) or _passed(r, axes, given)
            for axes, r in results.values()):
        return None  # views only (Reshape, Squeeze, Transpose): the exporter lays them out
    whole = op in WHOLE or (op in FLATTENING and importer.opset < 13)
    if name != op and not whole and _one_primitive(op, results, args):
        return None
    _make_op(name)
    outs = _composite(importer, node, ctx, results, name)
    if outs and op in FLATTENING:  # the model's Transpose pair around it (nodes are shared:
        source = transposed_pair(importer, node)  # the last import's reading counts)
        READ_TRANSPOSED.pop(outs[0].node, None)
        if source is not None and set(source) == set(outs[0].node.axes) == set(args[0].axes):
            READ_TRANSPOSED[outs[0].node] = source
    return outs


def _composite(importer, node, ctx: _Recording, results: dict, op: str) -> list | None:
    spec, graph = proto.NodeProto(), proto.GraphProto()
    spec.CopyFrom(node)
    del spec.input[:], spec.output[:]
    spec.name = ""
    last = max(results)
    spec.output.extend(f"y{i}" if i in results else "" for i in range(last + 1))
    for i, (axes, result) in results.items():
        graph.output.append(proto.make_tensor_value_info(
            f"y{i}", np_elem(result.dtype), [a.length for a in axes], _order(result, axes)))
    args, size = [], 0
    for i, name in enumerate(node.input):
        value = importer.consts.get(name) if name else None
        if not name:
            spec.input.append("")
            continue
        if i in ctx.constants or (value is not None and i not in ctx.tensors):
            size += value.size
            graph.initializer.append(ndarrays.from_array(np.asarray(value), f"k{i}"))
        if i in ctx.tensors or value is None:
            t = importer.tensor(name, ctx)
            spec.input.append(f"a{len(args)}")
            graph.input.append(proto.make_empty_tensor_value_info(f"a{len(args)}"))
            graph.input[-1].doc_string = _order(t.node, t.axes)
            args.append(t.node if graph.input[-1].doc_string else t.ordered())
        else:
            spec.input.append(f"c{i}")
    if size > CONST_LIMIT:
        return None
    graph.node.append(spec)
    text = text_of(graph)
    outs = [None] * (last + 1)
    for i, (axes, result) in results.items():
        whole = make_node(op, args, spec=text, opset=importer.opset,
                          axes=result.axes, dtype=result.dtype, output=i)
        outs[i] = Tensor(whole, axes)
    return outs


# -- export ---------------------------------------------------------------------------------
#: Emitter -> {(spec, opset, args): the output names of the ONNX node written for them}.
_WRITTEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def write(em, n: Node) -> tuple[str, tuple[int, ...]] | None:
    """The ONNX name of composite n written as (an output of) its ONNX node at the export's
    opset, and the order of its dimensions (positions in n's axes); None when that opset
    cannot hold it as one node. The composites of one ONNX
    node's outputs share the node written for the first of them."""
    key = (n.attrs["spec"], n.attrs["opset"], n.args)
    written = _WRITTEN.setdefault(em, {})
    if key not in written:
        written[key] = _write(em, n)
    names = written[key]
    return None if names is None else names[n.attrs["output"]]


def _write(em, n: Node) -> list | None:
    graph = graph_of(n.attrs["spec"])
    orders = {v.name: _perm(v) for v in [*graph.input, *graph.output]}
    target = getattr(em, "target", em.opset)  # older than em.opset: as read (`downgrade`)
    spec = _at_opset(n.attrs["spec"], n.attrs["opset"], min(target, em.opset))
    source = READ_TRANSPOSED.get(n)  # between the model's Transpose pair: written with it
    if spec is None or (source is None and _needs_transpose(em, n, spec, orders)
                        and (n.op in RAISED or _one_node(n))):
        return None  # the body: its writers choose the operands' order (and raise the form)
    consts = {t.name: t for t in graph.initializer}
    inputs = []
    for name in spec.input:
        if name.startswith("a"):
            arg = n.args[int(name[1:])]
            order = positional(arg, orders[name])
            if source is not None and name == "a0":
                inputs.append(em.node("Transpose", [em.exact(arg, source)],
                                      perm=[source.index(a) for a in order]))
                continue
            inputs.append(em.exact(arg, order))
        elif name.startswith("c"):
            value = ndarrays.to_array(consts[f"k{name[1:]}"])
            inputs.append(em.const(value, dtype=value.dtype))
        else:
            inputs.append(name)
    outs = [em.fresh() if name else "" for name in spec.output]
    written = type(spec)()
    written.CopyFrom(spec)
    del written.input[:], written.output[:]
    written.input.extend(inputs)
    written.output.extend(outs)
    written.doc_string = AS_READ  # what the model had: later passes leave it as it is
    em.nodes.append(written)
    if spec.domain not in ("", "ai.onnx"):
        _DOMAINS.setdefault(em, set()).add(spec.domain)
    written = [(out, orders.get(f"y{i}")) for i, out in enumerate(outs)]
    if source is not None:  # the inverse Transpose: the value in the order before the pair
        read = positional(n, written[0][1])
        back = em.node("Transpose", [outs[0]], perm=[read.index(a) for a in source])
        written[0] = (back, tuple(list(n.axes).index(a) for a in source))
    return written


def _needs_transpose(em, n: Node, spec, orders) -> bool:
    """Whether an argument's written value is not in the ONNX order the node reads."""
    for name in spec.input:
        if name.startswith("a"):
            arg = n.args[int(name[1:])]
            value, order = em.values[arg], positional(arg, orders[name])
            if value.array is None and not em.ordered(value, order):
                return True
    return False


def _one_node(n: Node) -> bool:
    """Whether the composite's body computes with one primitive (views aside)."""
    return composite.simple(composite.body(n), n.args)


#: Emitter -> the domains other than ONNX's own its composites were written in.
_DOMAINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def add_domains(em, opsets: list) -> None:
    """The opset imports of the other domains composites were written in (version 1)."""
    known = {o.domain for o in opsets}
    opsets.extend(proto.make_opsetid(d, 1) for d in sorted(_DOMAINS.get(em, ())) if d not in known)


def writable(n: Node, opset: int) -> bool:
    """Whether composite n is one ONNX node at `opset`."""
    return _at_opset(n.attrs["spec"], n.attrs["opset"], opset) is not None


@functools.lru_cache(maxsize=4096)
def _at_opset(text: str, source: int, target: int):
    """The spec's node as the target opset writes it (onnx's version converter), or None."""
    node = graph_of(text).node[0]
    if source == target or node.domain not in ("", "ai.onnx"):
        return node
    try:
        if (proto.get_schema(node.op_type, source).since_version
                == proto.get_schema(node.op_type, target).since_version):
            return node
    except Exception:  # noqa: BLE001  no schema at one of them
        return None
    return _converted(text, source, target)


def _converted(text: str, source: int, target: int):
    from onnx import version_converter

    graph = type(graph_of(text))()
    graph.CopyFrom(graph_of(text))
    names = [i for i in graph.node[0].input if i and not i.startswith("c")]
    graph.input.extend(proto.make_empty_tensor_value_info(i) for i in names)
    for t in graph.initializer:  # inputs named c<i> read initializers k<i>
        t.name = "c" + t.name[1:]
    model = proto.make_model(graph, opset_imports=[proto.make_opsetid("", source)])
    try:
        converted = version_converter.convert_version(model, target)
    except Exception:  # noqa: BLE001  no adapter: the body is written
        return None
    nodes = converted.graph.node
    if len(nodes) != 1 or nodes[0].op_type != graph.node[0].op_type:
        return None
    schema = proto.get_schema(nodes[0].op_type, target)
    if any(a.name not in schema.attributes for a in nodes[0].attribute):
        return None  # the converter kept an attribute the target's op does not have
    if any(i.startswith("c") and i not in {t.name for t in graph.initializer}
           for i in nodes[0].input):
        return None
    return nodes[0]
