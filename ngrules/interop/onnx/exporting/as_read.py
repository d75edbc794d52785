"""What the exporter keeps of the model it was read from: its graph inputs, so that an input
nothing reads is written back in its place, and enough of the model to ask onnxruntime whether
it refuses the model as read.

An import records a `Source` on its placeholders and outputs (weakly: a graph nobody holds takes
its record with it). It holds the model without its large initializers (those are names, types
and shapes only, as `refused` gives them to onnxruntime), never a node of the graph. The
exporter finds the record of the graph it writes (`of`): where onnxruntime refuses the written
model, `refused` asks whether it refuses the model as read for the same reason (`refusal`: no
kernel for the same op, or the same message), and writes it with a warning then: the output is
no less runnable than the input.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ngrules.interop.onnx import proto
from ngrules.ir.graph import Node

#: placeholder or output node of an import -> its `Source` (the last import's, as INPUT_ORDER).
_SOURCES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(eq=False)
class Source:
    """A model as read: `model` without its large initializers, `weights` those as
    name -> (ONNX element type, shape), `inputs` its graph inputs (not the weights, nor inputs
    bound as constants) as name -> (element type, lengths the import gave their dimensions)."""

    model: object
    weights: dict[str, tuple[int, tuple[int, ...]]]
    inputs: dict[str, tuple[int, tuple[int, ...]]]
    _refusals: dict = field(default_factory=dict)  # check -> `reason`, or None: taken


def remember(importer, model, arrays: Mapping[str, np.ndarray], outputs: Iterable[Node]) -> None:
    """Record the model read on the import's placeholders and output nodes."""
    from ngrules.interop.onnx.weights import elem_of

    inputs = {}
    for vi in importer.graph.input:
        node = importer.placeholders.get(vi.name)
        if node is not None:
            inputs[vi.name] = (vi.type.tensor_type.elem_type, tuple(node.axes.lengths))
    weights = {name: (elem_of(a), tuple(a.shape)) for name, a in arrays.items()}
    source = Source(model, weights, inputs)
    for node in [*importer.placeholders.values(), *outputs]:
        _SOURCES[node] = source


def of(order: Sequence[Node]) -> Source | None:
    """The record of the import the graph's placeholders (or, with none, its nodes) come from,
    when they all name inputs of that one model."""
    leaves = [n for n in order if n.op == "Placeholder"]
    found = {id(s): s for n in (leaves or order) if (s := _SOURCES.get(n)) is not None}
    if len(found) != 1:
        return None
    source = next(iter(found.values()))
    if any(n.attrs["name"] not in source.inputs for n in leaves):
        return None  # a placeholder the model has not: a graph made by hand around it
    return source


def add_unread(em, source: Source | None) -> None:
    """The model's graph inputs nothing reads written back, every input in the model's order
    (the ones the graph added after them)."""
    if source is None:
        return
    written = {vi.name: vi for vi in em.inputs}
    for name, (elem, lengths) in source.inputs.items():
        if name not in written:
            written[name] = proto.make_tensor_value_info(name, elem, list(lengths))
    rank = {name: i for i, name in enumerate(source.inputs)}
    em.inputs[:] = sorted(written.values(), key=lambda vi: rank.get(vi.name, len(rank)))


def name_outputs(model, source: Source | None) -> None:
    """Output dimensions the model read left symbolic under names of its own (no graph input's:
    an exporter's `Reshapey_dim_2`) written under those names again where the written model
    knows their length, so the outputs keep the model's dim_params. An input's symbol the import
    was given a length for (`--length`) stays that length."""
    if source is None:
        return
    graph = source.model.graph
    read = {vi.name: vi.type.tensor_type.shape.dim for vi in graph.output}
    given = {d.dim_param for vi in graph.input for d in vi.type.tensor_type.shape.dim}
    for vi in model.graph.output:
        dims = vi.type.tensor_type.shape.dim
        if len(read.get(vi.name, ())) != len(dims):
            continue
        for dim, was in zip(dims, read[vi.name]):
            if was.dim_param and was.dim_param not in given and dim.HasField("dim_value"):
                dim.dim_param = was.dim_param  # (one of the two: the length is cleared)


# -- onnxruntime's refusals -------------------------------------------------------------------
#: The op a refusal for want of a kernel names: "implementation for Max(13)", "kernel for
#: Swish(24)", "ai.onnx.preview.training:Adam(-1) is not a registered function/op".
_NO_KERNEL = (re.compile(r"(?:implementation|kernel) for (\w+)\(-?\d+\)"),
              re.compile(r"(\w+)\(-?\d+\) is not a registered function/op"))


def no_kernel_op(message: str) -> str | None:
    """The op type a refusal for want of a kernel names, or None for any other refusal."""
    for pattern in _NO_KERNEL:
        found = pattern.search(message)
        if found:
            return found.group(1)
    return None


def reason(message: str) -> str:
    """What a refusal says, so that two of them compare: the op a refusal for want of a kernel
    names ("no kernel for Max"), else its text with the names of nodes and values blanked
    (a batch-first LSTM: "Batchwise recurrent operations (layout == 1) are not supported")."""
    op = no_kernel_op(message)
    if op is not None:
        return f"no kernel for {op}"
    blanked = re.sub(r"'[^']*'|\"[^\"]*\"|Node \([^)]*\)|, node name: [^)]*", "", message)
    return " ".join(blanked.split())


def refusal(source: Source, check=None) -> str | None:
    """The `reason` onnxruntime (or `check`, which raises on the model: onnx's checker) refuses
    the model as read for; None when it takes it. Asked once per record and check."""
    key = "session" if check is None else check.__name__
    if key not in source._refusals:
        source._refusals[key] = _ask(source, check)
    return source._refusals[key]


def _ask(source: Source, check) -> str | None:
    model = proto.ModelProto()
    model.CopyFrom(source.model)
    for name, (elem, shape) in source.weights.items():
        model.graph.input.append(proto.make_tensor_value_info(name, elem, list(shape)))
    if check is None:
        message = session_error(model)
    else:
        try:
            check(model)
            message = None
        except Exception as e:  # noqa: BLE001  onnx's errors, of several types
            message = str(e)
    return None if message is None else reason(message)


def session_error(model) -> str | None:
    """onnxruntime's message refusing the model (nodes without a name named by their first
    output for the while), or None when it builds a session on it."""
    import onnxruntime as ort

    unnamed = [n for n in model.graph.node if not n.name]
    for node in unnamed:  # onnxruntime names nodes in its messages: give each its output's
        node.name = node.output[0] if node.output else node.op_type
    try:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 4
        ort.InferenceSession(model.SerializeToString(), options,
                             providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime's errors, of its own types
        return str(e)
    finally:
        for node in unnamed:
            node.name = ""
    return None
