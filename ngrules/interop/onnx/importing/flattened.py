"""Shapes of symbolic dimensions flattened together, computed where onnx's inference cannot.

Symbolic dimensions get stand-in lengths, primes above 10^6 (`ir.symbolic`); onnx's shape
inference multiplies dimensions in int64, so a Reshape or Flatten over four of them overflows
it (F15 of issue 37). Inference then runs without the stand-ins, and leaves the output of such
a Reshape unknown. Here its shape is computed with Python's integers, which do not overflow,
and written into the model: each symbolic dimension as a `dim_param` (the model's own name for
it, or a label such as `b*c*d`, whose length `labels` holds), so that inference, run again,
carries it to the nodes that read it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ngrules.interop.onnx import ndarrays, proto
from ngrules.interop.onnx.written import attribute
from ngrules.ir import symbolic

#: The most Reshapes and Flattens computed here for one model (one inference each).
MAX_ROUNDS = 16

#: Dims of a value: ints, None for one not known.
Dims = tuple[int | None, ...]


def completed(infer, model, lengths: Mapping[str, int]):
    """`infer(model)` (returning (inferred model, errors)) again after each Reshape or Flatten
    whose output it left unknown is given its shape; (inferred model, errors, labels): the
    length of each `dim_param` written here, or given to an output's own `dim_param`."""
    labels: dict[str, int] = {}
    given = model
    model = _outputs_open(model, lengths)
    inferred, errors = infer(model)
    for _ in range(MAX_ROUNDS):
        found = _first_unknown(inferred, {**lengths, **labels})
        if found is None:
            break
        model = _with_dims(model, *found, labels)
        inferred, errors = infer(model)
    _outputs_named(given, inferred, lengths, labels)
    return inferred, errors, labels


def _outputs_open(model, lengths: Mapping[str, int]):
    """A copy whose outputs leave open each dimension named by a `dim_param` of no known
    length (`n` of an output [a, n]), which inference would otherwise keep unknown."""
    copy = proto.ModelProto()
    copy.CopyFrom(model)
    for v in copy.graph.output:
        for d in v.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param not in lengths:
                d.Clear()
    return copy


def _outputs_named(given, inferred, lengths: Mapping[str, int], labels: dict[str, int]) -> None:
    """The outputs' own `dim_param`s written back into the inferred model, each with the
    length inference found for its dimension."""
    found = {v.name: v for v in inferred.graph.output}
    for v in given.graph.output:
        dims = found[v.name].type.tensor_type.shape.dim if v.name in found else []
        for d, out in zip(v.type.tensor_type.shape.dim, dims):
            if d.HasField("dim_param") and d.dim_param not in lengths:
                length = out.dim_value if out.HasField("dim_value") else labels.get(
                    out.dim_param)
                if length:
                    out.dim_param, labels[d.dim_param] = d.dim_param, length


def _first_unknown(model, lengths: Mapping[str, int]):
    """The first Reshape or Flatten whose output is unknown and computable: (its output, its
    dims, its element type), or None."""
    graph = model.graph
    infos = [*graph.input, *graph.value_info, *graph.output]
    shapes = {v.name: _dims(v, lengths) for v in infos}
    elems = {v.name: v.type.tensor_type.elem_type for v in infos}
    values = {t.name: t for t in graph.initializer}
    for init in graph.initializer:
        shapes[init.name] = tuple(init.dims)
    for node in graph.node:
        if node.op_type not in ("Reshape", "Flatten") or node.domain not in ("", "ai.onnx"):
            continue
        out, source = shapes.get(node.output[0]), shapes.get(node.input[0])
        if (out is not None and None not in out) or source is None or None in source:
            continue
        dims = (_flatten(node, source) if node.op_type == "Flatten"
                else _reshape(node, source, values))
        if dims is not None:
            return node.output[0], dims, elems.get(node.output[0]) or elems.get(node.input[0])
    return None


def _dims(value_info, lengths: Mapping[str, int]) -> Dims | None:
    tt = value_info.type.tensor_type
    if not tt.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else lengths.get(d.dim_param)
                 for d in tt.shape.dim)


def _flatten(node, source: tuple[int, ...]) -> tuple[int, ...]:
    axis = attribute(node, "axis", 1)
    axis = axis + len(source) if axis < 0 else axis
    return math.prod(source[:axis]), math.prod(source[axis:])


def _reshape(node, source: tuple[int, ...], values) -> tuple[int, ...] | None:
    target = values.get(node.input[1]) if len(node.input) > 1 else None
    if target is None or len(target.dims) != 1:
        return None
    shape = [int(d) for d in np.ravel(ndarrays.to_array(target))]
    keep_zero = attribute(node, "allowzero")
    dims = [source[i] if d == 0 and not keep_zero and i < len(source) else d
            for i, d in enumerate(shape)]
    known = math.prod(d for d in dims if d != -1)
    if dims.count(-1) > 1 or any(d < -1 for d in dims) or known == 0:
        return None
    total = math.prod(source)
    if -1 in dims:
        dims[dims.index(-1)] = total // known
    return tuple(dims) if math.prod(dims) == total else None


def _with_dims(model, name: str, dims: tuple[int, ...], elem: int, labels: dict[str, int]):
    """A copy of model in which value `name` has these dims (symbolic ones as labels)."""
    copy = proto.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    info = next((v for v in graph.output if v.name == name), None)
    if info is None:
        info = next((v for v in graph.value_info if v.name == name), None)
        if info is None:
            info = graph.value_info.add()
            info.CopyFrom(proto.make_tensor_value_info(name, elem, None))
    info.type.tensor_type.elem_type = info.type.tensor_type.elem_type or elem
    shape = info.type.tensor_type.shape
    del shape.dim[:]
    for length in dims:
        d = shape.dim.add()
        static, symbols = symbolic.factor(length)
        if not symbols:
            d.dim_value = length
        else:
            d.dim_param = _label(static, symbols)
            labels.setdefault(d.dim_param, length)
    return copy


def _label(static: int, symbols: list[str]) -> str:
    return "*".join(symbols + ([str(static)] if static != 1 else []))
