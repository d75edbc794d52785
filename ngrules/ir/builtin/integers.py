"""Integer and bit-level ops as ONNX and C define them: BitShift (shifts of the bits, a shift
outside [0, bits) giving 0, or -1 for a negative value shifted right) and TruncDivide (the
quotient rounded toward zero, C's `/` on integers; trunc(x / y) on floats), whose values are
steps, so their gradient is zero; and BitCast (the same bits read as another dtype of the same
width), which has no gradient."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import opgen as G
from ngrules.ir.builtin.common import (
    arith_dtype,
    check_dtype,
    elementwise_infer,
    no_grad,
    result_dtype,
)
from ngrules.ir.ops import AttrSpec, NotDifferentiable, register_op


def _integer_dtype(op, args):
    dtype = result_dtype(op, args)
    if dtype.kind not in "iu":
        raise OpError(f"{op}: needs integer operands, got {dtype}; cast first")
    return dtype


def _shift_kernel(node):
    left = node.attrs["direction"] == "left"

    def shift(a, b):
        bits = a.dtype.itemsize * 8
        inside = (b >= 0) & (b < bits)
        amount = np.where(inside, b, 0).astype(a.dtype)
        if left:  # in the unsigned twin, so that bits shifted out of a signed value wrap
            unsigned = np.dtype(f"u{a.dtype.itemsize}")
            moved = np.left_shift(a.view(unsigned), amount.view(unsigned)).view(a.dtype)
            return np.where(inside, moved, np.zeros_like(a))
        outside = np.where(a < 0, -1, 0).astype(a.dtype) if a.dtype.kind == "i" else 0
        return np.where(inside, np.right_shift(a, amount), outside).astype(a.dtype)

    return shift


def _check_direction(args, attrs):
    if attrs["direction"] not in ("left", "right"):
        raise OpError(f"BitShift: direction must be 'left' or 'right', got {attrs['direction']!r}")
    return elementwise_infer("BitShift", _integer_dtype)(args, attrs)


register_op(
    "BitShift",
    arity=2,
    attrs=(AttrSpec("direction", "str", "left", doc="'left' (x * 2**y, wrapping) or 'right'"),),
    infer=_check_direction,
    kernel=_shift_kernel,
    grad=no_grad,
    gen=G.gen_bit_shift,
    traits={"elementwise"},
    doc="x's bits shifted by y places (integers); a shift outside [0, bits) gives 0, or -1 "
    "for a negative x shifted right",
)


def _trunc_divide_kernel(node):
    def divide(a, b):
        if a.dtype.kind == "f":
            return np.trunc(a / b)
        safe = np.where(b == 0, 1, b).astype(a.dtype)
        with np.errstate(over="ignore"):  # the lowest value / -1 wraps, as in C
            q = np.floor_divide(a, safe)
        rounded_down = (np.remainder(a, safe) != 0) & ((a < 0) ^ (safe < 0))
        return np.where(b == 0, 0, q + rounded_down.astype(a.dtype)).astype(a.dtype)

    return divide


register_op(
    "TruncDivide",
    arity=2,
    infer=elementwise_infer("TruncDivide", arith_dtype),
    kernel=_trunc_divide_kernel,
    grad=no_grad,
    gen=G.gen_trunc_divide,
    traits={"elementwise"},
    domain=("real", "nonzero"),
    doc="x / y rounded toward zero (C's integer division; an integer x / 0 is 0)",
)


def _bit_cast_infer(args, attrs):
    (x,) = args
    dtype = check_dtype("BitCast", attrs["dtype"])
    if dtype.itemsize != x.dtype.itemsize:
        raise OpError(f"BitCast: {x.dtype} has {x.dtype.itemsize * 8} bits, {dtype} "
                      f"{dtype.itemsize * 8}; the widths must agree")
    return x.axes, dtype


register_op(
    "BitCast",
    arity=1,
    attrs=(AttrSpec("dtype", "dtype", doc="the result's dtype, as wide as x's"),),
    infer=_bit_cast_infer,
    kernel=lambda node: lambda a, dtype=node.dtype: np.asarray(a).view(dtype),
    grad=NotDifferentiable("it reads the bits of x as another type"),
    gen=G.gen_bit_cast,
    traits={"elementwise"},
    doc="the bits of x read as `dtype` (of the same width): no value is converted",
)
