"""Logic on bool tensors (bitwise on integers): And, Or, Xor, Not; and the float tests IsNaN
and IsInf. None carries a gradient (their values are discrete); `no_grad` makes it zero."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import opgen as G
from ngrules.ir.builtin.common import BOOL, elementwise_infer, float_dtype, no_grad, result_dtype
from ngrules.ir.ops import register_op


def _logic_dtype(op, args):
    dtype = result_dtype(op, args)
    if dtype != BOOL and dtype.kind not in "iu":
        raise OpError(f"{op}: needs bool (or integer) operands, got {dtype}")
    return dtype


def _test_dtype(op, args):
    float_dtype(op, args)
    return BOOL


for _name, _fn, _arity, _traits, _doc in (
    ("And", np.bitwise_and, 2, {"commutative", "associative"}, "x and y (bitwise on integers)"),
    ("Or", np.bitwise_or, 2, {"commutative", "associative"}, "x or y (bitwise on integers)"),
    ("Xor", np.bitwise_xor, 2, {"commutative", "associative"}, "x xor y (bitwise on integers)"),
    ("Not", np.invert, 1, set(), "not x (bitwise on integers)"),
):
    register_op(
        _name,
        arity=_arity,
        infer=elementwise_infer(_name, _logic_dtype),
        kernel=lambda node, fn=_fn: fn,
        grad=no_grad,
        gen=G.gen_logical(_name),
        traits={"elementwise", *_traits},
        doc=_doc,
    )

for _name, _fn, _doc in (
    ("IsNaN", np.isnan, "x is not a number, as a bool tensor"),
    ("IsInf", np.isinf, "x is +inf or -inf, as a bool tensor"),
):
    register_op(
        _name,
        arity=1,
        infer=elementwise_infer(_name, _test_dtype),
        kernel=lambda node, fn=_fn: fn,
        grad=no_grad,
        gen=G.leaf_args(G.gen_elementwise(_name)),
        traits={"elementwise"},
        doc=_doc,
    )
