"""What the built-in op families share: dtype and axes checks for inference."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir.axes import Axes

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
#: Every dtype a tensor may have: numpy's bool, integers and floats (float16 too).
DTYPES = tuple(
    np.dtype(t)
    for t in (
        np.bool_, np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64,
        np.float16, np.float32, np.float64,
    )
)  # fmt: skip
BOOL = np.dtype(np.bool_)


def check_dtype(op: str, dtype) -> np.dtype:
    """dtype as a numpy dtype, if it is one ngrules supports."""
    dtype = np.dtype(dtype)
    if dtype not in DTYPES:
        names = ", ".join(d.name for d in DTYPES)
        raise OpError(f"{op}: dtype {dtype} is not supported (use one of {names})")
    return dtype


# -- inference helpers -------------------------------------------------------------------------
def result_dtype(op: str, args) -> np.dtype:
    """The common dtype of the arguments (all must agree)."""
    dtypes = {a.dtype for a in args}
    if len(dtypes) > 1:
        raise OpError(f"{op}: arguments mix dtypes {sorted(d.name for d in dtypes)}")
    return args[0].dtype


def arith_dtype(op: str, args) -> np.dtype:
    """The dtype of arithmetic on the arguments: bool operands (masks) take the dtype of the
    others, which must agree; all-bool arithmetic is refused (numpy's is logic, not sums)."""
    dtypes = {a.dtype for a in args} - {BOOL}
    if not dtypes:
        raise OpError(f"{op}: arithmetic on bool operands only; cast one first")
    if len(dtypes) > 1:
        raise OpError(f"{op}: arguments mix dtypes {sorted(d.name for d in dtypes)}")
    return dtypes.pop()


def float_dtype(op: str, args) -> np.dtype:
    """The common dtype, which must be a float (for ops with no integer meaning)."""
    dtype = result_dtype(op, args)
    if dtype.kind != "f":
        raise OpError(f"{op}: needs float operands, got {dtype}; cast first")
    return dtype


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


def elementwise_infer(op: str, dtype=None):
    """Operands of one axes; the result has `dtype(op, args)` (default: arith_dtype)."""
    dtype_of = dtype or arith_dtype

    def infer(args, attrs):
        first = args[0].axes
        for a in args[1:]:
            if not same_axes(a.axes, first):
                raise OpError(f"{op}: operands have axes {first!r} and {a.axes!r}; broadcast first")
        return first, dtype_of(op, args)

    return infer


def no_grad(node, delta):
    return tuple(None for _ in node.args)


