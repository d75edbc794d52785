"""A written model checked as the tools that read it would: never a file onnxruntime refuses.

onnx's checker passes models that onnxruntime refuses (a Gemm whose C has three dimensions
fails only when it runs). So the exporter's last step checks what it wrote three ways, and a
failure is an `OnnxError` naming the node, raised before anything is written:

1. onnx's checker and its shape inference in strict mode (types checked);
2. the rules onnxruntime's kernels apply that ONNX's shape inference does not (`_RULES`), on the
   inferred shapes;
3. where onnxruntime is installed, a session built on the model (its own graph checks, a kernel
   for every node). The weights go in as graph inputs of their type and shape, as for the
   checker: their bytes are never copied, and no optimisation runs.

The output need only be no less runnable than the input: where onnxruntime refuses the model
read (`as_read`) for the same reason (no kernel for the same op: a model made for another
runtime, an op newer than onnxruntime), or onnx's checker refuses it alike (its strict inference
of MeanVarianceNormalization's body), the model is written with a `RefusedAsRead` warning.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping

import numpy as np

from ngrules.interop.onnx import OnnxError, proto
from ngrules.interop.onnx.exporting import as_read


def check(model, arrays: Mapping[str, np.ndarray], source=None) -> None:
    """Raise `OnnxError` naming the node if onnx or onnxruntime would refuse the model
    completed by `arrays` (its large initializers, not in the message); warn instead where
    onnxruntime refuses the model read (`source`, an `as_read.Source`) for the same op."""
    from ngrules.interop.onnx.weights import as_inputs

    with as_inputs(model, arrays):
        inferred = _checked(model, source)
        if inferred is not None:
            _check_rules(inferred)
        _check_session(model, source)


def _strict(model):
    """The model checked by onnx's checker and inferred in strict mode (raising on either)."""
    proto.check_model(model)
    return proto.infer_shapes(model, check_type=True, strict_mode=True)


def _checked(model, source):
    """The model inferred by `_strict`; None (with a warning) where onnx refuses the model read
    (`source`) alike (its strict inference of MeanVarianceNormalization's body at opset 13)."""
    try:
        return _strict(model)
    except Exception as e:  # noqa: BLE001  onnx's own errors, of several types
        text = f"the written model fails onnx's checker: {_first_line(e)}"
        if source is None or as_read.refusal(source, _strict) != as_read.reason(str(e)):
            raise OnnxError(text) from None
        warnings.warn(RefusedAsRead(f"written all the same: onnx's checker refuses the input "
                                    f"model as well, alike: {text}"), stacklevel=3)
        return None


def _first_line(e: Exception) -> str:
    lines = [line for line in str(e).splitlines() if line.strip()]
    return (lines[0] if lines else type(e).__name__)[:500]


def _label(node) -> str:
    return f"{node.op_type} node {node.name or node.output[0]!r}"


# -- onnxruntime's rules that the checker does not apply --------------------------------------
def _shapes(model) -> dict[str, list]:
    """Value name -> its dimensions (an int, a dim_param, or None) where they are known."""
    out = {}
    graph = model.graph
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        if vi.type.tensor_type.HasField("shape"):
            out[vi.name] = [d.dim_value if d.HasField("dim_value") else d.dim_param or None
                            for d in vi.type.tensor_type.shape.dim]
    for init in graph.initializer:
        out[init.name] = list(init.dims)
    return out


def _gemm(node, shapes: Mapping[str, list]) -> str | None:
    """C must broadcast to (M, N) one way: (), (1,), (N,), (1, N), (M, 1) or (M, N)."""
    if len(node.input) < 3 or not node.input[2]:
        return None
    a, b, c = (shapes.get(n) for n in node.input[:3])
    if c is None:
        return None
    if len(c) > 2:
        return f"its bias C has {len(c)} dimensions {c} (at most 2)"
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return None
    attrs = {x.name: x.i for x in node.attribute}
    m = a[1] if attrs.get("transA") else a[0]
    n = b[0] if attrs.get("transB") else b[1]
    fits = (c in ([], [1], [1, 1], [n], [1, n], [m, 1], [m, n]))
    if not fits:
        return f"its bias C of shape {c} does not broadcast to ({m}, {n})"
    return None


#: op type -> (node, shapes) -> why onnxruntime refuses the node, or None.
_RULES: dict[str, Callable] = {"Gemm": _gemm}


def _check_rules(inferred) -> None:
    shapes = _shapes(inferred)
    for node in inferred.graph.node:
        rule = _RULES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        why = rule(node, shapes) if rule else None
        if why:
            raise OnnxError(f"the written model would be refused by onnxruntime: {_label(node)}: "
                            f"{why}")


# -- an onnxruntime session -------------------------------------------------------------------
class RefusedAsRead(UserWarning):
    """The written model is refused by onnxruntime as the model read was, for the same reason
    (no kernel for the same op): written all the same (a model made for another runtime)."""


def _check_session(model, source=None) -> None:
    try:
        import onnxruntime as ort
    except ImportError:  # not installed: the checks above are all there is
        return
    message = as_read.session_error(model)
    if message is None:
        return
    text = _session_message(model, message, ort.__version__)
    why = as_read.reason(message)
    if source is None or as_read.refusal(source) != why:
        raise OnnxError(text)
    same = f"for the same reason ({why})" if why.startswith("no kernel") else "alike"
    warnings.warn(RefusedAsRead(
        f"written all the same: onnxruntime refuses the input model as well, {same}; it "
        f"checks no node after that one: {text}"), stacklevel=2)


def _session_message(model, message: str, version: str) -> str:
    found = re.search(r"name ?:? ?'([^']+)'|Node \(([^)]+)\)", message, re.IGNORECASE)
    where = ""
    if found:
        name = found.group(1) or found.group(2)
        node = next((n for n in model.graph.node if _called(n) == name), None)
        where = f"{_label(node)}: " if node is not None else f"node {name!r}: "
    text = " ".join(message.split())[:400]
    return f"onnxruntime {version} refuses the written model: {where}{text}"


def _called(node) -> str:
    """The name onnxruntime knew the node by (`as_read.session_error` names an unnamed node
    by its first output)."""
    return node.name or (node.output[0] if node.output else node.op_type)
