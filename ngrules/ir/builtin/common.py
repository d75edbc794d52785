"""What the built-in op families share: dtype and axes checks for inference."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir.axes import Axes

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


# -- inference helpers -------------------------------------------------------------------------
def result_dtype(op: str, args) -> np.dtype:
    """The common dtype of the arguments (all must agree)."""
    dtypes = {a.dtype for a in args}
    if len(dtypes) > 1:
        raise OpError(f"{op}: arguments mix dtypes {sorted(d.name for d in dtypes)}")
    return args[0].dtype


def same_axes(a: Axes, b: Axes) -> bool:
    return a == b and a.lengths == b.lengths


def check_subset(op: str, inner: Axes, outer: Axes, what: str) -> None:
    """Every axis of inner must be in outer, with the same length."""
    for ax in inner:
        if ax not in outer:
            raise OpError(f"{op}: {what} axis {ax!r} is not in {outer!r}")
        if outer[outer.index(ax)].length != ax.length:
            raise OpError(
                f"{op}: axis {ax.name!r} has length {ax.length} and {outer[outer.index(ax)].length}"
            )


def elementwise_infer(op: str):
    def infer(args, attrs):
        first = args[0].axes
        for a in args[1:]:
            if not same_axes(a.axes, first):
                raise OpError(f"{op}: operands have axes {first!r} and {a.axes!r}; broadcast first")
        return first, result_dtype(op, args)

    return infer


def no_grad(node, delta):
    return tuple(None for _ in node.args)


