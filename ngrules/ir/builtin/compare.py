"""Comparisons (bool results), Select and Cast.

Comparisons give a bool tensor; arithmetic treats a bool operand as a 0/1 mask of the other
operand's dtype (see `arith_dtype`), so `delta * greater(x, 0)` keeps delta's dtype. Their
gradient is zero wherever it is defined.
"""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import builders as F
from ngrules.ir import opgen as G
from ngrules.ir.builtin.common import (
    BOOL,
    check_dtype,
    elementwise_infer,
    no_grad,
    result_dtype,
    same_axes,
)
from ngrules.ir.ops import AttrSpec, register_op


def _bool_result(op, args):
    result_dtype(op, args)  # the operands must agree
    return BOOL


for _name, _fn, _traits, _doc in (
    ("Equal", np.equal, {"commutative"}, "x == y"),
    ("NotEqual", np.not_equal, {"commutative"}, "x != y"),
    ("Greater", np.greater, set(), "x > y"),
    ("Less", np.less, set(), "x < y"),
    ("GreaterEqual", np.greater_equal, set(), "x >= y"),
    ("LessEqual", np.less_equal, set(), "x <= y"),
):
    register_op(
        _name,
        arity=2,
        infer=elementwise_infer(_name, _bool_result),
        kernel=lambda node, fn=_fn: fn,
        grad=no_grad,
        gen=G.leaf_args(G.gen_elementwise(_name)),
        traits={"elementwise", *_traits},
        doc=f"{_doc}, as a bool tensor",
    )


def _select_infer(args, attrs):
    cond, x, y = args
    if cond.dtype != BOOL:
        raise OpError(f"Select: the condition must be bool, got {cond.dtype}")
    if not (same_axes(cond.axes, x.axes) and same_axes(x.axes, y.axes)):
        raise OpError(f"Select: operands have axes {cond.axes!r}, {x.axes!r}, {y.axes!r}")
    return x.axes, result_dtype("Select", (x, y))


def _select_grad(node, d):
    cond = node.args[0]
    zero = F.constant(0.0, d.axes, dtype=d.dtype)
    return None, F.where(cond, d, zero), F.where(cond, zero, d)


register_op(
    "Select",
    arity=3,
    infer=_select_infer,
    kernel=lambda node: np.where,
    grad=_select_grad,
    gen=G.gen_select,
    traits={"elementwise"},
    doc="x where cond, else y (cond bool)",
)


def _cast_infer(args, attrs):
    return args[0].axes, check_dtype("Cast", attrs["dtype"])


def _cast_kernel(node):
    dtype = node.dtype
    return lambda a: a.astype(dtype)


def _cast_grad(node, d):
    """The adjoint cast back to x's dtype; none flows into integer or bool tensors."""
    x = node.args[0]
    return (F.cast(d, x.dtype) if x.dtype.kind == "f" else None,)


register_op(
    "Cast",
    arity=1,
    attrs=(AttrSpec("dtype", "dtype", doc="the result's dtype"),),
    infer=_cast_infer,
    kernel=_cast_kernel,
    grad=_cast_grad,
    gen=G.leaf_args(G.gen_cast),
    traits={"elementwise"},
    doc="x converted to `dtype` (numpy's astype: floats to integers truncate)",
)
