"""Activations: Sigmoid and Softmax, the ops ngraph's front end builds as composites
(`reciprocal(exp(-x) + 1)`, and `exp(x - max(x)) / sum(...)` over normalization axes), and Erf
(for the exact form of GELU, as ONNX exports write it)."""

from __future__ import annotations

import math

import numpy as np

from ngrules.ir import builders as F
from ngrules.ir import opgen as G
from ngrules.ir.builtin.common import check_subset, elementwise_infer, float_dtype
from ngrules.ir.ops import AttrSpec, register_op


def _sigmoid(x):
    """1 / (1 + exp(-x)) without overflow: 0.5 * (1 + tanh(x / 2)), in x's dtype."""
    half = x.dtype.type(0.5)
    return half + half * np.tanh(half * x)


register_op(
    "Sigmoid",
    arity=1,
    infer=elementwise_infer("Sigmoid", float_dtype),
    kernel=lambda node: _sigmoid,
    grad=lambda n, d: (d * n * (1.0 - n),),
    gen=G.leaf_args(G.gen_elementwise("Sigmoid")),
    traits={"elementwise"},
    doc="1 / (1 + exp(-x))",
)


def _softmax_infer(args, attrs):
    (x,), axes = args, attrs["normalization_axes"]
    check_subset("Softmax", axes, x.axes, "normalization")
    return x.axes, float_dtype("Softmax", args)


def _softmax_kernel(node):
    x = node.args[0]
    where = tuple(x.axes.index(a) for a in node.attrs["normalization_axes"])

    def run(a):
        e = np.exp(a - np.max(a, axis=where, keepdims=True))
        return e / np.sum(e, axis=where, keepdims=True)

    return run


def _softmax_grad(node, d):
    """s * (d - sum(d * s)) over the normalization axes, computed as s * (e - sum(e * s)) with
    e = d - k for k the delta at the largest s (the mean over ties), which is the same since the
    s sum to 1: `d - sum(d * s)` would lose the digits of 1 - s where s is near 1 (for
    d = [1, 0] it is s0 - s0 * s0); here the largest term is exactly zero and the rest are
    products of small numbers, so the result is exact to rounding, like the primitive form's."""
    red, x = node.attrs["normalization_axes"], node.args[0]
    top = F.cast(F.equal(x, F.broadcast(F.max(x, reduction_axes=red), x.axes)), d.dtype)
    k = F.sum(d * top, reduction_axes=red) / F.sum(top, reduction_axes=red)
    e = d - F.broadcast(k, node.axes)
    return (node * (e - F.broadcast(F.sum(e * node, reduction_axes=red), node.axes)),)


register_op(
    "Softmax",
    arity=1,
    attrs=(AttrSpec("normalization_axes", "axes", doc="the axes each distribution spans"),),
    infer=_softmax_infer,
    kernel=_softmax_kernel,
    grad=_softmax_grad,
    gen=G.leaf_args(G.gen_softmax),
    doc="exp(x - max(x)) / sum(exp(x - max(x))) over normalization_axes",
)


_ERF = np.frompyfunc(math.erf, 1, 1)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _erf_kernel(node):
    dtype = node.dtype
    return lambda a: np.asarray(_ERF(a), dtype=dtype)


register_op(
    "Erf",
    arity=1,
    infer=elementwise_infer("Erf", float_dtype),
    kernel=_erf_kernel,
    grad=lambda n, d: (d * _TWO_OVER_SQRT_PI * F.exp(-F.square(n.args[0])),),
    gen=G.leaf_args(G.gen_elementwise("Erf")),
    traits={"elementwise"},
    doc="the error function 2/sqrt(pi) * integral of exp(-t^2) from 0 to x",
)
