"""Reductions: remove `reduction_axes` (Sum, Max, Min, Prod)."""

from __future__ import annotations

import numpy as np

from ngrules.ir import frontend as F
from ngrules.ir import opgen as G
from ngrules.ir.builtin.common import check_subset
from ngrules.ir.ops import AttrSpec, register_op


# -- reductions --------------------------------------------------------------------------------
def _reduction_infer(name):
    def infer(args, attrs):
        (x,), red = args, attrs["reduction_axes"]
        check_subset(name, red, x.axes, "reduction")
        return x.axes - red, x.dtype

    return infer


def _reduction_kernel(fn):
    def kernel(node):
        x = node.args[0]
        where = tuple(x.axes.index(a) for a in node.attrs["reduction_axes"])
        return lambda a: fn(a, axis=where)

    return kernel


def _sum_grad(node, d):
    return (F.broadcast(d, node.args[0].axes),)


def _extremum_grad(node, d):
    """Route the adjoint to the places that attain the extremum (ngraph: equal(x, max) * d)."""
    x = node.args[0]
    return (F.broadcast(d, x.axes) * F.equal(x, F.broadcast(node, x.axes)),)


def _prod_grad(node, d):
    x = node.args[0]
    return (F.broadcast(d * node, x.axes) / x,)


for _name, _fn, _grad, _domain in (
    ("Sum", np.sum, _sum_grad, "real"),
    ("Max", np.max, _extremum_grad, "real"),
    ("Min", np.min, _extremum_grad, "real"),
    ("Prod", np.prod, _prod_grad, "nonzero"),
):
    register_op(
        _name,
        arity=1,
        attrs=(AttrSpec("reduction_axes", "axes"),),
        infer=_reduction_infer(_name),
        kernel=_reduction_kernel(_fn),
        grad=_grad,
        gen=G.gen_reduction(_name),
        traits={"reduction"},
        domain=(_domain,),
        doc=f"{_name.lower()} over reduction_axes",
    )
