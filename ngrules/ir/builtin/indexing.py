"""Indexing ops: OneHot (class indices to vectors along a new leading axis)."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import opgen as G
from ngrules.ir.axes import Axes
from ngrules.ir.builtin.common import check_dtype
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
