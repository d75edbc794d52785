"""Elementwise math that networks exported to ONNX use beyond arithmetic: Sin, Cos and Atan
(from which the other trigonometric and hyperbolic functions are built), Floor, Ceil and Round
(zero gradient almost everywhere), and Mod (numpy's `mod`, or C's `fmod`)."""

from __future__ import annotations

import numpy as np

from ngrules.ir import opgen as G
from ngrules.ir.builtin.common import arith_dtype, elementwise_infer, float_dtype, no_grad
from ngrules.ir.graph import make_node
from ngrules.ir.ops import AttrSpec, register_op


def _unary(name: str, fn, grad, doc: str) -> None:
    register_op(
        name,
        arity=1,
        infer=elementwise_infer(name, float_dtype),
        kernel=lambda node: fn,
        grad=grad,
        gen=G.leaf_args(G.gen_elementwise(name)),
        traits={"elementwise"},
        doc=doc,
    )


def _atan_grad(node, d):
    x = node.args[0]
    return (d / (x * x + 1.0),)


_unary("Sin", np.sin, lambda n, d: (d * make_node("Cos", n.args),), "sine")
_unary("Cos", np.cos, lambda n, d: (-(d * make_node("Sin", n.args)),), "cosine")
_unary("Atan", np.arctan, _atan_grad, "arc tangent, in (-pi/2, pi/2)")
_unary("Floor", np.floor, no_grad, "the largest integer <= x (zero gradient)")
_unary("Ceil", np.ceil, no_grad, "the smallest integer >= x (zero gradient)")
_unary("Round", np.rint, no_grad, "x rounded to the nearest integer, halves to even")


def _mod_kernel(node):
    fn = np.fmod if node.attrs["fmod"] else np.mod
    return lambda a, b: fn(a, b)


def _mod_grad(node, d):
    """x - y * q with q = floor(x / y) (trunc for fmod): adjoints d and -d * q."""
    x, y = node.args
    ratio = x / y
    if node.attrs["fmod"]:
        q = make_node("Sign", (ratio,)) * make_node("Floor", (make_node("Absolute", (ratio,)),))
    else:
        q = make_node("Floor", (ratio,))
    return d, -(d * q)


register_op(
    "Mod",
    arity=2,
    attrs=(AttrSpec("fmod", "int", 0, doc="0: the sign of y (numpy's mod); 1: of x (fmod)"),),
    infer=elementwise_infer("Mod", arith_dtype),
    kernel=_mod_kernel,
    grad=_mod_grad,
    gen=G.leaf_args(G.gen_mod),
    traits={"elementwise"},
    domain=("real", "nonzero"),
    doc="the remainder of x / y: x - y * floor(x / y), or x - y * trunc(x / y) with fmod=1",
)
