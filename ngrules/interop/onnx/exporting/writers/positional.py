"""The exporter's ops written over their operands in the nodes' own order of axes.

Each function takes the Emitter, the node and the ONNX names of its arguments, each holding the
argument's axes in the argument's order, and returns the name (or names) of a result in the
node's order. `elementwise` writes the common ops without that constraint; these are for the
rest, and for what it hands on.
"""

from __future__ import annotations

import string
from collections.abc import Callable

import numpy as np

from ngrules.interop.onnx import OnnxError, ndarrays
from ngrules.interop.onnx.exporting.functions import DOMAIN
from ngrules.interop.onnx.exporting.writers.positional_ops import EXPORTERS as NETWORK_OPS


def elem_type(dtype) -> int:
    """The ONNX element type of a numpy dtype."""
    return ndarrays.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _elementwise(op: str):
    return lambda em, n, a: em.node(op, a)


def _arithmetic(op: str):
    """An arithmetic op whose bool operands (masks) are cast to the result's dtype first."""

    def emit(em, n, a):
        a = [name if arg.dtype == n.dtype else em.node("Cast", [name], to=elem_type(n.dtype))
             for arg, name in zip(n.args, a)]
        return em.node(op, a)

    return emit


def _not_equal(em, n, a):
    return em.node("Not", [em.node("Equal", a)])


def _softmax(em, n, a):
    """exp(x - max) / sum(exp(x - max)) over the normalisation axes, kept as length 1."""
    x = n.args[0]
    axes = [x.axes.index(ax) for ax in n.attrs["normalization_axes"]]
    top = em.node("ReduceMax", a, axes=axes, keepdims=1)
    e = em.node("Exp", [em.node("Sub", [a[0], top])])
    return em.node("Div", [e, em.node("ReduceSum", [e, em.const(axes)], keepdims=1)])


def _arg(op: str):
    def emit(em, n, a):
        x = n.args[0]
        red = n.attrs["reduction_axes"]
        if len(red) != 1:
            raise OnnxError(f"cannot export {n!r}: ONNX {op} takes one axis")
        found = em.node(op, a, axis=x.axes.index(red[0]), keepdims=0)
        if np.dtype(n.dtype) == np.int64:  # ONNX's own result type
            return found
        return em.node("Cast", [found], to=elem_type(n.dtype))

    return emit


def _reduce(op: str):
    def emit(em, n, a):
        x = n.args[0]
        axes = [x.axes.index(ax) for ax in n.attrs["reduction_axes"]]
        if op == "ReduceSum":
            return em.node(op, [a[0], em.const(axes)], keepdims=0)
        if x.dtype == np.bool_:  # ONNX reduces bools only from opset 20
            found = em.node(op, [em.node("Cast", a, to=elem_type(np.int32))], axes=axes, keepdims=0)
            return em.node("Cast", [found], to=elem_type(np.bool_))
        return em.node(op, a, axes=axes, keepdims=0)

    return emit


def _matmul(em, n, a):
    """DotLowDimension as a 2-D MatMul: vectors become [k, 1] or [1, k] matrices (onnxruntime
    1.32 fuses Transpose into a MatMul with a 1-D operand wrongly; 2-D operands avoid it)."""
    x, y = n.args
    if len(x.axes) == 2 and len(y.axes) == 2:
        return em.node("MatMul", a)
    xa = a[0] if len(x.axes) == 2 else em.node("Reshape", [a[0], em.const([1, -1])])
    ya = a[1] if len(y.axes) == 2 else em.node("Reshape", [a[1], em.const([-1, 1])])
    return em.node("Reshape", [em.node("MatMul", [xa, ya]), em.const(list(n.axes.lengths))])


def _letters(axes, table: dict[str, str]) -> str:
    for ax in axes:
        if ax.name not in table:
            table[ax.name] = string.ascii_letters[len(table)]
    return "".join(table[ax.name] for ax in axes)


def _dot(em, n, a):
    x, y = n.args
    table: dict[str, str] = {}
    if len(set(x.axes.names) | set(y.axes.names)) > len(string.ascii_letters):
        raise OnnxError(f"cannot export {n!r}: more axes than Einsum letters")
    eq = f"{_letters(x.axes, table)},{_letters(y.axes, table)}->{_letters(n.axes, table)}"
    return em.node("Einsum", a, equation=eq)


def _broadcast(em, n, a):
    x, out = n.args[0], n.axes
    inner = [ax for ax in out if ax in x.axes]
    name = a[0]
    perm = [x.axes.index(ax) for ax in inner]
    if perm != list(range(len(perm))):
        name = em.node("Transpose", [name], perm=perm)
    shape = [ax.length if ax in x.axes else 1 for ax in out]
    name = em.node("Reshape", [name, em.const(shape)])
    return em.node("Expand", [name, em.const(list(out.lengths))])


def _reorder(em, n, a):
    x = n.args[0]
    return em.node("Transpose", a, perm=[x.axes.index(ax) for ax in n.axes])


def _reshape(em, n, a):
    return em.node("Reshape", [a[0], em.const(list(n.axes.lengths))])


def _slice(em, n, a):
    at = n.attrs
    ins = [a[0], em.const([at["start"]]), em.const([at["stop"]]), em.const([at["position"]])]
    return em.node("Slice", ins)


def _tensor_slice(em, n, a):
    """Slice with steps; integer-indexed axes (step 0) are then reshaped away."""
    spec = np.asarray(n.attrs["slices"])
    starts = [int(r[0]) for r in spec]
    stops = [int(r[0]) + 1 if r[2] == 0 else int(r[1]) for r in spec]
    steps = [int(r[2]) or 1 for r in spec]
    axes = list(range(len(spec)))
    ins = [a[0], em.const(starts), em.const(stops), em.const(axes), em.const(steps)]
    out = em.node("Slice", ins)
    if (spec[:, 2] == 0).any():
        out = em.node("Reshape", [out, em.const(list(n.axes.lengths))])
    return out


def _pad(em, n, a):
    pads = np.asarray(n.attrs["paddings"])
    return em.node("Pad", [a[0], em.const(list(pads[:, 0]) + list(pads[:, 1]))])


def _reverse(em, n, a):
    """A Slice with step -1 from the last entry past the first along each reversed axis."""
    at = [n.axes.index(ax) for ax in n.attrs["reverse_axes"]]
    ins = [a[0], em.const([-1] * len(at)), em.const([np.iinfo(np.int64).min] * len(at)),
           em.const(at), em.const([-1] * len(at))]
    return em.node("Slice", ins)


def _unslice(em, n, a):
    """Zeros with x written at the slices: a Pad where every step is 1."""
    spec = np.asarray(n.attrs["slices"])
    if (spec[:, 2] > 1).any():
        raise OnnxError(f"cannot export {n!r}: Unslice with steps above 1")
    x = a[0]
    if (spec[:, 2] == 0).any():  # integer-indexed axes come back as length 1 first
        shape = [1 if r[2] == 0 else int(r[1] - r[0]) for r in spec]
        x = em.node("Reshape", [x, em.const(shape)])
    before = [int(r[0]) for r in spec]
    after = [ax.length - int(r[0]) - (1 if r[2] == 0 else int(r[1] - r[0]))
             for r, ax in zip(spec, n.axes)]
    return em.node("Pad", [x, em.const(before + after)])


def _expand_dims(em, n, a):
    grown = em.node("Unsqueeze", [a[0], em.const([n.attrs["position"]])])
    return em.node("Expand", [grown, em.const(list(n.axes.lengths))])


def _to_onnx_layout(em, name: str) -> str:
    """ngraph's (C, D, H, W, N) as ONNX's (N, C, D, H, W)."""
    return em.node("Transpose", [name], perm=[4, 0, 1, 2, 3])


def _from_onnx_layout(em, name: str) -> str:
    return em.node("Transpose", [name], perm=[1, 2, 3, 4, 0])


def _geometry(attrs) -> dict:
    pads = [int(p) for p in attrs["padding"]]
    return {"pads": pads + pads, "strides": [int(s) for s in attrs["strides"]]}


def _convolution(em, n, a):
    x = _to_onnx_layout(em, a[0])
    w = em.node("Transpose", [a[1]], perm=[4, 0, 1, 2, 3])  # (C, T, R, S, K) -> (K, C, T, R, S)
    y = em.node("Conv", [x, w], dilations=[int(d) for d in n.attrs["dilation"]],
                group=n.attrs["groups"], **_geometry(n.attrs))
    return _from_onnx_layout(em, y)


def _pooling(em, n, a):
    window = [int(k) for k in n.attrs["window"]]
    if n.attrs["mode"] == "max":
        y = em.node("MaxPool", [_to_onnx_layout(em, a[0])], kernel_shape=window,
                    **_geometry(n.attrs))
    else:
        y = em.node("AveragePool", [_to_onnx_layout(em, a[0])], kernel_shape=window,
                    count_include_pad=1, **_geometry(n.attrs))
    return _from_onnx_layout(em, y)


def _relu(em, n, a):
    slope = n.attrs["slope"]
    return em.node("Relu", a) if slope == 0.0 else em.node("LeakyRelu", a, alpha=slope)


def _fused(em, n, a):
    em.functions.add(n.op)
    outs = len(n.outputs) if n.outputs is not None else 1
    return em.node(n.op, a, n_out=outs, domain=DOMAIN, **dict(n.attrs))


POSITIONAL: dict[str, Callable] = {
    "Add": _arithmetic("Add"),
    "Subtract": _arithmetic("Sub"),
    "Multiply": _arithmetic("Mul"),
    "Divide": _arithmetic("Div"),
    "Maximum": _arithmetic("Max"),
    "Minimum": _arithmetic("Min"),
    "Negative": _elementwise("Neg"),
    "Reciprocal": _elementwise("Reciprocal"),
    "Sqrt": _elementwise("Sqrt"),
    "Exp": _elementwise("Exp"),
    "Log": _elementwise("Log"),
    "Tanh": _elementwise("Tanh"),
    "Erf": _elementwise("Erf"),
    "Square": lambda em, n, a: em.node("Mul", [a[0], a[0]]),
    "Equal": _elementwise("Equal"),
    "NotEqual": _not_equal,
    "Greater": _elementwise("Greater"),
    "Less": _elementwise("Less"),
    "GreaterEqual": _elementwise("GreaterOrEqual"),
    "LessEqual": _elementwise("LessOrEqual"),
    "Select": _elementwise("Where"),
    "Cast": lambda em, n, a: em.node("Cast", a, to=elem_type(n.dtype)),
    "Power": _arithmetic("Pow"),
    "Absolute": _elementwise("Abs"),
    "Sign": _elementwise("Sign"),
    "Sigmoid": _elementwise("Sigmoid"),
    "Softmax": _softmax,
    "Argmax": _arg("ArgMax"),
    "Argmin": _arg("ArgMin"),
    "Sum": _reduce("ReduceSum"),
    "Max": _reduce("ReduceMax"),
    "Min": _reduce("ReduceMin"),
    "Prod": _reduce("ReduceProd"),
    "Dot": _dot,
    "DotLowDimension": _matmul,
    "Broadcast": _broadcast,
    "ReorderAxes": _reorder,
    "Transpose": lambda em, n, a: em.node("Transpose", a),
    "Flatten": _reshape,
    "Unflatten": _reshape,
    "Concat": lambda em, n, a: em.node("Concat", a, axis=n.attrs["position"]),
    "TensorSlice": _tensor_slice,
    "Unslice": _unslice,
    "Pad": _pad,
    "ExpandDims": _expand_dims,
    "AxesCast": lambda em, n, a: a[0],  # a renaming: the same data
    "Slice": _slice,
    "Reverse": _reverse,
    "Relu": _relu,
    "Convolution": _convolution,
    "Pooling": _pooling,
    "ReluBprop": _fused,
    "BatchnormFprop": _fused,
    "BatchnormBprop": _fused,
    **NETWORK_OPS,  # written over operands in their own order, as these emitters assume
}


