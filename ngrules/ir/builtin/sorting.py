"""TopKIndices: the positions of the k largest (or smallest) values along an axis, in order,
ties to the lower position (ONNX TopK's indices). The values follow from the indices by a
OneHot and a sum (differentiable in x), so only the integer positions need an op."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import opgen as G
from ngrules.ir.axes import Axes
from ngrules.ir.builtin.common import check_subset
from ngrules.ir.ops import AttrSpec, NotDifferentiable, register_op


def _infer(args, attrs):
    (x,) = args
    axis, k = attrs["axis"], attrs["top"]
    check_subset("TopKIndices", Axes((axis,)), x.axes, "sorted")
    if k.length > axis.length:
        raise OpError(f"TopKIndices: k={k.length} is more than the {axis!r} sorted")
    pos = x.axes.index(axis)
    if k in x.axes[:pos] + x.axes[pos + 1 :]:
        raise OpError(f"TopKIndices: the result axis {k!r} is already one of {x.axes!r}")
    return x.axes[:pos] + Axes((k,)) + x.axes[pos + 1 :], np.dtype(np.int64)


def _kernel(node):
    x = node.args[0]
    pos, k = x.axes.index(node.attrs["axis"]), node.attrs["top"].length
    largest = node.attrs["largest"]

    def run(a):
        key = a
        if largest:  # descending, stable: negate (floats) or complement (integers)
            key = -a if a.dtype.kind == "f" else ~a
        order = np.argsort(key, axis=pos, kind="stable")
        return np.take(order, np.arange(k), axis=pos).astype(np.int64)

    return run


register_op(
    "TopKIndices",
    arity=1,
    attrs=(
        AttrSpec("axis", "axis", doc="the axis sorted along"),
        AttrSpec("top", "axis", doc="the result's axis in its place: k positions"),
        AttrSpec("largest", "int", 1, doc="1: the largest values first; 0: the smallest"),
    ),
    infer=_infer,
    kernel=_kernel,
    grad=NotDifferentiable("its result is integer positions"),
    gen=G.leaf_args(G.gen_top_k),
    doc="the positions of the k largest (smallest) values along `axis`, in order, ties to "
        "the lower position",
)
