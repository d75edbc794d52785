"""A model written at opset 17 rewritten in the forms of an older opset, node by node.

The exporter writes every op in its opset-17 form. A model read at an older opset is written
back at its own (`cli.graphio.written_opset`), so each node is put in the form the older opset
defines, with the same meaning: axes given as an input become the attribute they were
(`Squeeze`, `Unsqueeze`, `ReduceSum`, `Split`), `Pad`, `Clip`, `Slice` and `TopK` take their
constant inputs as attributes, a `Softmax` over its last axis (or one followed only by
dimensions of length 1) is the same before opset 13, a negative axis is counted from the
front. onnx's version converter has no downward adapter for most ops, so these are ngrules'
own. An op whose opset-17 definition differs from the older one (from opset 7) in types only is
written as it is (onnx's checker then checks the types at the older opset); below opset 7 only
an op whose definition has not changed since. Any other node is an `OnnxError`
naming the node and the opset: never a model silently at another opset.

A node an ONNX op kept whole wrote as read at the target opset (`composites`) is marked
`AS_READ` and left as it is (the mark is removed here, at every opset).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ngrules.interop.onnx import OnnxError, ndarrays, proto
from ngrules.interop.onnx.written import attribute

#: The form every writer uses; models are rewritten from it down to `OLDEST`.
WRITTEN = 17
OLDEST = 1
#: Below it, only ops whose definition is the same as at 17 are written.
SAME_FROM = 7
#: doc_string of a node already in the target opset's form (a composite written as read).
AS_READ = "ngrules:as-read"

#: Ops whose definitions between 7 and 17 differ in the types they take (or in attributes
#: and inputs the exporter never writes): the opset-17 node means the same at the older opset.
_SAME_FORM = """
    Abs Acos Acosh Add And ArgMax ArgMin Asin Asinh Atan Atanh AveragePool BatchNormalization
    Cast Ceil Concat Constant ConstantOfShape Conv ConvTranspose Cos Cosh CumSum DepthToSpace
    Div Einsum Elu Equal Erf Exp Expand Flatten Floor Gather GatherElements GatherND
    Gemm GlobalAveragePool GlobalMaxPool Greater GreaterOrEqual HardSigmoid Identity
    InstanceNormalization IsInf IsNaN LRN LeakyRelu Less LessOrEqual Log MatMul Max MaxPool
    Mean Min Mod Mul Neg NonZero Not OneHot Or PRelu Pow Range Reciprocal ReduceL1 ReduceL2
    ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSumSquare Relu
    Reshape Round ScatterElements ScatterND Selu Shape Sigmoid Sign Sin Sinh Size Softplus
    Softsign SpaceToDepth Sqrt Sub Sum Tan Tanh Tile Transpose Trilu Where Xor
"""
SAME_FORM = frozenset(_SAME_FORM.split())

#: Ops whose axis attribute may be negative only from opset 11.
_AXIS_OPS = frozenset({"Concat", "Flatten", "Gather", "GatherElements", "ArgMax", "ArgMin",
                       "Softmax", "LogSoftmax", "Hardmax", "Split", "CumSum", "OneHot",
                       "ScatterElements", "Squeeze", "Unsqueeze", "ReduceSum", "ReduceMean",
                       "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                       "ReduceLogSumExp", "ReduceSumSquare"})


def to_opset(model, opset: int, arrays: Mapping[str, np.ndarray]) -> None:
    """Rewrite `model` (written at opset 17, its large initializers in `arrays`) at `opset`:
    first every node that needs no shape, then (shapes inferred at `opset`) those that do.
    Every opset: the `AS_READ` marks removed."""
    if opset >= WRITTEN:
        for node in model.graph.node:
            if node.doc_string == AS_READ:
                node.doc_string = ""
        return
    if opset < OLDEST:
        raise OnnxError(f"to_onnx writes opsets {OLDEST} to 28, not {opset}")
    consts = _constants(model)
    pending = [n for n in model.graph.node if _node(n, opset, consts)]
    for function in model.functions:  # their bodies: no shapes known, constants their own
        inner = _constants(function)
        if any(_node(n, opset, inner) for n in function.node):
            raise OnnxError(f"cannot write function {function.name!r} at opset {opset}: a node "
                            "of its body needs its input's shape there")
    _prune_initializers(model)
    for o in [*model.opset_import, *(o for f in model.functions for o in f.opset_import)]:
        if o.domain in ("", "ai.onnx"):
            o.version = opset
    if pending:
        ranks = _ranks(model, arrays)
        for node in pending:
            _with_shapes(model, node, opset, ranks)


def _node(node, opset: int, consts) -> bool:
    """One node in the target opset's form; True when that needs its input's shape."""
    if node.doc_string == AS_READ:
        node.doc_string = ""
        return False
    if node.domain not in ("", "ai.onnx"):
        return False
    try:
        old = proto.get_schema(node.op_type, opset).since_version
        new = proto.get_schema(node.op_type, WRITTEN).since_version
    except Exception:  # noqa: BLE001  onnx has no such op at that opset
        raise OnnxError(_no_form(node, opset, "the op does not exist there")) from None
    if old != new and _adapt(node, opset, consts):
        return True
    return opset < 11 and _negative_axis(node)


def _with_shapes(model, node, opset: int, ranks) -> None:
    op = node.op_type
    if op in ("Softmax", "LogSoftmax", "Hardmax") and opset < 13:
        _softmax(node, opset, ranks)
    elif op in ("Max", "Min", "Sum", "Mean"):
        shapes = {str(ranks.get(x, (None, None, 1))[1]) for x in node.input}
        if len(shapes) != 1 or "None" in next(iter(shapes)):
            raise OnnxError(_no_form(node, opset, "it broadcasts its inputs from opset 8"))
    elif op == "Gemm" and len(node.input) == 2:  # C is optional from 11
        zero = f"{node.output[0]}_no_bias"
        model.graph.initializer.append(ndarrays.make_tensor(zero, _elem(ranks, node), [], [0]))
        node.input.append(zero)
    if opset < 11:
        _positive_axis(node, ranks, opset)


def _label(node) -> str:
    return f"{node.op_type} node {node.name or node.output[0]!r}"


def _no_form(node, opset: int, why: str) -> str:
    return (f"cannot write {_label(node)} at opset {opset} (the input model's; give --opset "
            f"{WRITTEN} or later to convert): {why}")


def _adapt(node, opset: int, consts) -> bool:
    """The node in the older form where its inputs say how; True when that needs shapes."""
    op = node.op_type
    if op in ("Squeeze", "Unsqueeze", "ReduceSum") and opset < 13:
        _input_to_attr(node, 1, "axes", consts, opset)
        if op == "ReduceSum" and attribute(node, "noop_with_empty_axes"):
            raise OnnxError(_no_form(node, opset, "noop_with_empty_axes is from opset 13"))
    elif op == "Split" and opset < 13:
        _input_to_attr(node, 1, "split", consts, opset)
    elif op == "Pad" and opset < 11:
        _input_to_attr(node, 1, "pads", consts, opset)
        if len(node.input) > 1 and node.input[1]:
            value = _const(node, 1, consts, opset)
            _set(node, "value", float(np.ravel(value)[0]))
        del node.input[1:]
    elif op == "Clip" and opset < 11:
        for i, name in ((1, "min"), (2, "max")):
            if len(node.input) > i and node.input[i]:
                _set(node, name, float(np.ravel(_const(node, i, consts, opset))[0]))
        del node.input[1:]
    elif op == "Slice" and opset < 10:
        _slice(node, opset, consts)
    elif op == "TopK" and opset < 10:
        if not attribute(node, "largest", 1) or not attribute(node, "sorted", 1):
            raise OnnxError(_no_form(node, opset, "the smallest or unsorted are from opset 11"))
        _input_to_attr(node, 1, "k", consts, opset, scalar=True)
        _drop_attrs(node, "largest", "sorted")
    elif (op in ("Softmax", "LogSoftmax", "Hardmax") and opset < 13) or (
            op in ("Max", "Min", "Sum", "Mean") and opset < 8):
        return True  # the same only for some shapes
    elif op == "Gemm" and opset < 11:
        return len(node.input) == 2
    elif op not in SAME_FORM or opset < SAME_FROM:
        raise OnnxError(_no_form(node, opset, "its older definition differs and ngrules has "
                                 "no rewrite to it"))
    return False


def _negative_axis(node) -> bool:
    return node.op_type in _AXIS_OPS and any(
        (a.name == "axis" and a.i < 0) or (a.name == "axes" and any(v < 0 for v in a.ints))
        for a in node.attribute)


def _softmax(node, opset: int, ranks) -> None:
    """Before 13 the op flattens the dimensions from `axis` on: the same when they are the last
    one, or when those after it have length 1."""
    rank, dims = ranks.get(node.input[0], (None, None, 1))[:2]
    if rank is None:
        raise OnnxError(_no_form(node, opset, "its input's rank is not known"))
    axis = attribute(node, "axis", -1)
    axis = axis + rank if axis < 0 else axis
    if axis != rank - 1 and any(d != 1 for d in dims[axis + 1:]):
        raise OnnxError(_no_form(node, opset, f"before opset 13 it normalises over every "
                                 f"dimension from {axis} on, not over {axis} alone"))
    _set(node, "axis", axis)


def _slice(node, opset: int, consts) -> None:
    starts, ends = (_const(node, i, consts, opset) for i in (1, 2))
    axes = _const(node, 3, consts, opset) if len(node.input) > 3 and node.input[3] else None
    if len(node.input) > 4 and node.input[4]:
        steps = _const(node, 4, consts, opset)
        if np.any(steps != 1):
            raise OnnxError(_no_form(node, opset, "steps other than 1 are from opset 10"))
    del node.input[1:]
    _set(node, "starts", [int(v) for v in np.ravel(starts)])
    _set(node, "ends", [int(min(v, 2**63 - 1)) for v in np.ravel(ends)])
    if axes is not None:
        _set(node, "axes", [int(v) for v in np.ravel(axes)])


def _positive_axis(node, ranks, opset: int) -> None:
    """A negative `axis` (or `axes`) counted from the front, as opsets before 11 require."""
    if node.op_type not in _AXIS_OPS:
        return
    for a in node.attribute:
        values = [a.i] if a.name == "axis" else list(a.ints) if a.name == "axes" else []
        if not any(v < 0 for v in values):
            continue
        rank = ranks.get(node.input[0], (None, None, 1))[:2][0]
        if rank is None:
            raise OnnxError(_no_form(node, opset, "a negative axis of an input of unknown rank"))
        if node.op_type == "Unsqueeze":
            rank += len(values)
        fixed = [v + rank if v < 0 else v for v in values]
        if a.name == "axis":
            a.i = fixed[0]
        else:
            del a.ints[:]
            a.ints.extend(fixed)


# -- helpers ----------------------------------------------------------------------------------
def _constants(model_or_function) -> dict[str, np.ndarray]:
    graph = getattr(model_or_function, "graph", model_or_function)
    found = {t.name: ndarrays.to_array(t) for t in getattr(graph, "initializer", ())}
    for node in graph.node:
        if node.op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].t.dims:
            found[node.output[0]] = ndarrays.to_array(node.attribute[0].t)
    return found


def _elem(ranks, node) -> int:
    """The element type of the node's first input (float where not known)."""
    return ranks.get(node.input[0], (None, None, 1))[-1] if node.input else 1


def _ranks(model, arrays: Mapping[str, np.ndarray]) -> dict[str, tuple]:
    """Value name -> (rank, dimensions: an int, or None where not known, element type) where
    inferred."""

    from ngrules.interop.onnx.weights import as_inputs, elem_of

    with as_inputs(model, arrays):
        try:
            inferred = proto.infer_shapes(model).graph
        except Exception:  # noqa: BLE001  ranks stay unknown: the nodes that need one say so
            inferred = None
    out: dict[str, tuple[int, list]] = {}
    if inferred is None:
        return out
    for vi in [*inferred.input, *inferred.value_info, *inferred.output]:
        t = vi.type.tensor_type
        if t.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
            out[vi.name] = (len(dims), dims, t.elem_type)
    for init in inferred.initializer:
        out[init.name] = (len(init.dims), list(init.dims), init.data_type)
    for name, a in arrays.items():
        out[name] = (a.ndim, list(a.shape), elem_of(a))
    return out


def _const(node, i: int, consts, opset: int) -> np.ndarray:
    value = consts.get(node.input[i]) if len(node.input) > i else None
    if value is None:
        raise OnnxError(_no_form(node, opset, f"input {i} is computed at run time, and the "
                                 "older opset takes it as an attribute"))
    return value


def _input_to_attr(node, i: int, name: str, consts, opset: int, scalar: bool = False) -> None:
    if len(node.input) <= i or not node.input[i]:
        return
    value = np.ravel(_const(node, i, consts, opset))
    del node.input[i:]
    _set(node, name, int(value[0]) if scalar else [int(v) for v in value])


def _set(node, name: str, value) -> None:
    _drop_attrs(node, name)
    node.attribute.append(proto.make_attribute(name, value))


def _drop_attrs(node, *names: str) -> None:
    kept = [a for a in node.attribute if a.name not in names]
    del node.attribute[:]
    node.attribute.extend(kept)


def _prune_initializers(model) -> None:
    """Initializers no node reads any more (axes now attributes) are dropped."""
    graph = model.graph
    read = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
    kept = [t for t in graph.initializer if t.name in read]
    del graph.initializer[:]
    graph.initializer.extend(kept)
