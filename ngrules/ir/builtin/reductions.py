"""Reductions: remove `reduction_axes` (Sum, Max, Min, Prod; Argmax and Argmin give the
position of the extremum, counted over the reduction axes flattened in x's order)."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import builders as F
from ngrules.ir import opgen as G
from ngrules.ir.builtin.common import check_dtype, check_subset
from ngrules.ir.ops import AttrSpec, NotDifferentiable, register_op


# -- reductions --------------------------------------------------------------------------------
def _reduction_infer(name):
    def infer(args, attrs):
        (x,), red = args, attrs["reduction_axes"]
        check_subset(name, red, x.axes, "reduction")
        if x.dtype.kind == "b" and name in ("Sum", "Prod"):
            raise OpError(f"{name}: cannot {name.lower()} a bool tensor; cast it first")
        return x.axes - red, x.dtype

    return infer


def _reduction_kernel(ufunc: np.ufunc):
    """The ufunc's `reduce` itself (what np.sum, np.max... call after a Python-level wrapper
    that costs a few microseconds per call)."""
    reduce = ufunc.reduce

    def kernel(node):
        x = node.args[0]
        where = tuple(x.axes.index(a) for a in node.attrs["reduction_axes"])
        if ufunc in (np.add, np.multiply):  # numpy widens small integers; keep x's dtype
            dtype = node.dtype
            return lambda a: reduce(a, axis=where, dtype=dtype)
        return lambda a: reduce(a, axis=where)

    return kernel


def _sum_grad(node, d):
    return (F.broadcast(d, node.args[0].axes),)


def _extremum_grad(node, d):
    """Route the adjoint to the places that attain the extremum (ngraph: equal(x, max) * d)."""
    x = node.args[0]
    return (F.broadcast(d, x.axes) * F.equal(x, F.broadcast(node, x.axes)),)


def _prod_grad(node, d):
    """ngraph's adjoint, exact where x has zeros: with no zero in a product, prod / x; with one,
    the product of the others at the zero (0 elsewhere); with two or more, 0 everywhere."""
    x, red = node.args[0], node.attrs["reduction_axes"]
    is_zero = F.equal(x, 0.0)
    zeros = F.sum(F.cast(is_zero, x.dtype), reduction_axes=red)
    no_zero = F.broadcast(F.equal(zeros, 0.0), x.axes)
    one_zero = F.broadcast(F.equal(zeros, 1.0), x.axes)
    ones = F.where(is_zero, 1.0, x)
    others = F.broadcast(F.prod(ones, reduction_axes=red), x.axes) / ones
    return (F.broadcast(d, x.axes) * (others * no_zero + others * one_zero * is_zero),)


for _name, _fn, _grad, _domain in (
    ("Sum", np.add, _sum_grad, "real"),
    ("Max", np.maximum, _extremum_grad, "real"),
    ("Min", np.minimum, _extremum_grad, "real"),
    ("Prod", np.multiply, _prod_grad, "real"),
):
    register_op(
        _name,
        arity=1,
        attrs=(AttrSpec("reduction_axes", "axes"),),
        infer=_reduction_infer(_name),
        kernel=_reduction_kernel(_fn),
        grad=_grad,
        gen=G.leaf_args(G.gen_reduction(_name)),
        traits={"reduction"},
        domain=(_domain,),
        doc=f"{_name.lower()} over reduction_axes",
    )


def _arg_infer(name):
    def infer(args, attrs):
        x, red = args[0], attrs["reduction_axes"]
        check_subset(name, red, x.axes, "reduction")
        dtype = check_dtype(name, attrs["dtype"])
        if dtype.kind not in "iu":
            raise OpError(f"{name}: dtype must be an integer type, got {dtype}")
        return x.axes - red, dtype

    return infer


def _arg_kernel(fn):
    """Move the reduction axes last, merge them, and take fn over the merged axis."""

    def kernel(node):
        x, red = node.args[0], node.attrs["reduction_axes"]
        keep = [x.axes.index(a) for a in x.axes if a not in red]
        moved = keep + [x.axes.index(a) for a in x.axes if a in red]
        shape, dtype = node.axes.lengths + (-1,), node.dtype
        return lambda a: fn(a.transpose(moved).reshape(shape), axis=-1).astype(dtype)

    return kernel


for _name, _fn in (("Argmax", np.argmax), ("Argmin", np.argmin)):
    register_op(
        _name,
        arity=1,
        attrs=(
            AttrSpec("reduction_axes", "axes"),
            AttrSpec("dtype", "dtype", np.int32, "the integer dtype of the positions"),
        ),
        infer=_arg_infer(_name),
        kernel=_arg_kernel(_fn),
        grad=NotDifferentiable("it gives integer positions"),
        gen=G.leaf_args(G.gen_reduction(_name)),
        traits={"reduction"},
        doc=f"position of the first {_name[3:]}imum over reduction_axes (flattened in x's order)",
    )
