"""Gather (x indexed along one axis by a tensor of run-time indices: the embedding lookup) and
its adjoint ScatterAdd (delta summed into zeros at those indices).

Gather's result has x's axes with the indexed axis replaced, at its position, by the indices'
axes. Indices are integers; a negative index counts from the end (as ONNX's), one still out of
range is clipped to the nearest end (numpy's `take(mode="clip")`): a kernel never raises on data.
"""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import opgen as G
from ngrules.ir.axes import Axes
from ngrules.ir.builtin.common import check_subset, result_dtype
from ngrules.ir.graph import make_node
from ngrules.ir.ops import AttrSpec, register_op

_AXIS = AttrSpec("axis", "axis", doc="the axis of x that the indices select along")


def gathered_axes(op: str, x_axes: Axes, indices, axis) -> Axes:
    """x's axes with `axis` replaced by the indices' axes."""
    if indices.dtype.kind not in "iu":
        raise OpError(f"{op}: indices must be integers, got {indices.dtype}; cast first")
    check_subset(op, Axes((axis,)), x_axes, "indexed")
    pos = x_axes.index(axis)
    try:
        return x_axes[:pos] + indices.axes + x_axes[pos + 1 :]
    except OpError as e:
        raise OpError(f"{op}: the indices' axes {indices.axes!r} clash with x's: {e}") from None


def _positions(i: np.ndarray, n: int) -> np.ndarray:
    return np.clip(np.where(i < 0, i + n, i), 0, n - 1)


def _gather_infer(args, attrs):
    x, indices = args
    return gathered_axes("Gather", x.axes, indices, attrs["axis"]), x.dtype


def _gather_kernel(node):
    x = node.args[0]
    pos, n = x.axes.index(node.attrs["axis"]), node.attrs["axis"].length
    return lambda a, i: np.take(a, _positions(i, n), axis=pos)


def _gather_grad(node, d):
    x, indices = node.args
    return make_node("ScatterAdd", (d, indices), axis=node.attrs["axis"], axes=x.axes), None


register_op(
    "Gather",
    arity=2,
    attrs=(_AXIS,),
    infer=_gather_infer,
    kernel=_gather_kernel,
    grad=_gather_grad,
    gen=G.gen_gather("Gather"),
    doc="x[..., indices, ...] along `axis`, which the indices' axes replace (negative: from "
        "the end; out of range: clipped)",
)


def _scatter_infer(args, attrs):
    delta, indices = args
    want = gathered_axes("ScatterAdd", attrs["axes"], indices, attrs["axis"])
    if delta.axes != want or delta.axes.lengths != want.lengths:
        raise OpError(f"ScatterAdd: delta has axes {delta.axes!r}, the indices ask for {want!r}")
    return attrs["axes"], result_dtype("ScatterAdd", (delta,))


def _scatter_kernel(node):
    shape, axes = node.axes.lengths, node.axes
    pos, n = axes.index(node.attrs["axis"]), node.attrs["axis"].length
    dtype = node.dtype

    def run(d, i):
        out = np.zeros(shape, dtype)
        np.add.at(out, (slice(None),) * pos + (_positions(i, n),), d)
        return out

    return run


def _scatter_grad(node, e):
    delta, indices = node.args
    return make_node("Gather", (e, indices), axis=node.attrs["axis"]), None


register_op(
    "ScatterAdd",
    arity=2,
    attrs=(_AXIS, AttrSpec("axes", "axes", doc="the result's axes (x's, for Gather's adjoint)")),
    infer=_scatter_infer,
    kernel=_scatter_kernel,
    grad=_scatter_grad,
    gen=G.gen_gather("ScatterAdd"),
    doc="zeros of `axes` with delta added at the indices along `axis` (Gather's adjoint; "
        "repeated indices add up)",
)
