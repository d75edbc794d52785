"""Indexing ops: OneHot (class indices to vectors along a new leading axis), AxisIndex (the
positions along an axis of a tensor, read from its shape: ONNX's Range to a dimension's length,
which stays a run-time computation when that length is symbolic)."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import opgen as G
from ngrules.ir.axes import Axes
from ngrules.ir.builtin.common import check_dtype, no_grad
from ngrules.ir.ops import AttrSpec, NotDifferentiable, register_op


def _one_hot_infer(args, attrs):
    (x,), axis = args, attrs["axis"]
    if x.dtype.kind not in "iu":
        raise OpError(f"OneHot: indices must be integers, got {x.dtype}; cast first")
    if axis in x.axes:
        raise OpError(f"OneHot: axis {axis!r} is already one of {x.axes!r}")
    return Axes((axis,)) + x.axes, check_dtype("OneHot", attrs["dtype"])


def _one_hot_kernel(node):
    classes = np.arange(node.attrs["axis"].length)
    dtype = node.dtype
    return lambda a: (classes.reshape((-1,) + (1,) * a.ndim) == a[None]).astype(dtype)


register_op(
    "OneHot",
    arity=1,
    attrs=(
        AttrSpec("axis", "axis", doc="the new leading axis, one entry per class"),
        AttrSpec("dtype", "dtype", np.float32),
    ),
    infer=_one_hot_infer,
    kernel=_one_hot_kernel,
    grad=NotDifferentiable("its input is integer class indices"),
    gen=G.gen_one_hot,
    doc="1 where the leading axis's position equals x's index, else 0 (out of range: all 0)",
)


def _axis_index_infer(args, attrs):
    (x,), axis = args, attrs["axis"]
    if axis not in x.axes:
        raise OpError(f"AxisIndex: axis {axis!r} is not one of {x.axes!r}")
    return Axes((axis,)), np.dtype(np.int64)


def _axis_index_kernel(node):
    x, axis = node.args[0], node.attrs["axis"]
    pos = x.axes.index(axis)
    return lambda a: np.arange(a.shape[pos], dtype=np.int64)


register_op(
    "AxisIndex",
    arity=1,
    attrs=(AttrSpec("axis", "axis", doc="an axis of x: the result's only axis"),),
    infer=_axis_index_infer,
    kernel=_axis_index_kernel,
    grad=no_grad,  # it reads only x's shape: no gradient flows to x
    gen=G.leaf_args(G.gen_axis_index),
    doc="0, 1, ..., n-1 along x's axis of length n (int64; reads x's shape, not its values)",
)
