"""Elementwise ops: operands carry exactly the output axes (the front end broadcasts).

Arithmetic that numpy keeps in the operands' dtype (+, -, *, max, min, negation, square,
absolute value, sign) takes integer and float16 operands too; ops whose numpy result would be
a float of another width (division, powers, roots, exp, log, tanh) need float operands."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import builders as F
from ngrules.ir import opgen as G
from ngrules.ir.builtin.common import arith_dtype, elementwise_infer, float_dtype, no_grad
from ngrules.ir.ops import register_op


# -- elementwise -------------------------------------------------------------------------------
def _ufunc(fn):
    return lambda node: fn


def _arith_float(op, args):
    """arith_dtype (bool masks promote), which must be a float."""
    dtype = arith_dtype(op, args)
    if dtype.kind != "f":
        raise OpError(f"{op}: needs float operands, got {dtype}; cast first")
    return dtype


def _unary(name, fn, grad, doc, domain="real", floats=False):
    register_op(
        name,
        arity=1,
        infer=elementwise_infer(name, float_dtype if floats else None),
        kernel=_ufunc(fn),
        grad=grad,
        gen=G.leaf_args(G.gen_elementwise(name)),
        traits={"elementwise"},
        domain=(domain,),
        doc=doc,
    )


def _binary(name, kernel, grad, doc, traits=(), domain=("real",), floats=False):
    register_op(
        name,
        arity=2,
        infer=elementwise_infer(name, _arith_float if floats else None),
        kernel=kernel,
        grad=grad,
        gen=G.leaf_args(G.gen_elementwise(name)),
        traits={"elementwise", *traits},
        domain=domain,
        doc=doc,
    )


def _divide_grad(node, d):
    x, y = node.args
    return d / y, -(d * node / y)


def _power_grad(node, d):
    """ngraph's adjoints: y * x**y / x for x, x**y * log(x) for y (x > 0)."""
    x, y = node.args
    return d * y * node / x, d * node * F.log(x)


def _maximum_grad(node, d):
    x, y = node.args
    dx = d * F.greater(x, y)
    return dx, d - dx


def _minimum_grad(node, d):
    x, y = node.args
    dx = d * F.less(x, y)
    return dx, d - dx


_binary("Add", _ufunc(np.add), lambda n, d: (d, d), "x + y", ("commutative", "associative"))
_binary("Subtract", _ufunc(np.subtract), lambda n, d: (d, -d), "x - y")
_binary(
    "Multiply",
    _ufunc(np.multiply),
    lambda n, d: (d * n.args[1], d * n.args[0]),
    "x * y",
    ("commutative", "associative"),
)
_binary("Divide", _ufunc(np.divide), _divide_grad, "x / y", domain=("real", "nonzero"), floats=True)
_binary("Maximum", _ufunc(np.maximum), _maximum_grad, "max(x, y)", ("commutative", "associative"))
_binary("Minimum", _ufunc(np.minimum), _minimum_grad, "min(x, y)", ("commutative", "associative"))
_binary("Power", _ufunc(np.power), _power_grad, "x ** y", domain=("positive", "real"), floats=True)

_unary("Negative", np.negative, lambda n, d: (-d,), "-x")
_unary("Reciprocal", np.reciprocal, lambda n, d: (-(d * n * n),), "1 / x", "nonzero", floats=True)
_unary("Sqrt", np.sqrt, lambda n, d: (d * 0.5 / n,), "square root", "positive", floats=True)
_unary("Square", np.square, lambda n, d: (d * 2.0 * n.args[0],), "x * x")
_unary("Exp", np.exp, lambda n, d: (d * n,), "e ** x", floats=True)
_unary("Log", np.log, lambda n, d: (d / n.args[0],), "natural logarithm", "positive", floats=True)
_unary("Tanh", np.tanh, lambda n, d: (d * (1.0 - n * n),), "hyperbolic tangent", floats=True)
_unary("Absolute", np.abs, lambda n, d: (d * F.sign(n.args[0]),), "|x|")
_unary("Sign", np.sign, no_grad, "-1, 0 or 1 by the sign of x (zero gradient)")
