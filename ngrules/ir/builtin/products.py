"""Products: `Dot` contracts every axis its operands share; `DotLowDimension` is its
2-D/1-D form."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import frontend as F
from ngrules.ir import opgen as G
from ngrules.ir.axes import Axes, make_axis
from ngrules.ir.builtin.common import result_dtype
from ngrules.ir.graph import make_node
from ngrules.ir.ops import AttrSpec, register_op


# -- products ----------------------------------------------------------------------------------
def _dot_infer(args, attrs):
    x, y = args
    red = x.axes & y.axes
    return (x.axes - red) + (y.axes - red), result_dtype("Dot", args)


def _dot_kernel(node):
    """One matmul of (x_out, red) by (red, y_out) views: np.tensordot without its overhead."""
    x, y = node.args
    red = x.axes & y.axes
    x_out, y_out = x.axes - red, y.axes - red
    px = [x.axes.index(a) for a in x_out + red]
    py = [y.axes.index(a) for a in red + y_out]
    m, k, n, shape = x_out.size, red.size, y_out.size, node.axes.lengths
    return lambda a, b: np.matmul(
        a.transpose(px).reshape(m, k), b.transpose(py).reshape(k, n)
    ).reshape(shape)


def _dot_grad(node, d):
    x, y = node.args
    return F.axes_with_order(F.dot(d, y), x.axes), F.axes_with_order(F.dot(x, d), y.axes)


register_op(
    "Dot",
    arity=2,
    infer=_dot_infer,
    kernel=_dot_kernel,
    grad=_dot_grad,
    gen=G.leaf_args(G.gen_dot),
    derived={
        "reduction_axes": lambda n: n.args[0].axes & n.args[1].axes,
        "x_out_axes": lambda n: n.args[0].axes - n.args[1].axes,
        "y_out_axes": lambda n: n.args[1].axes - n.args[0].axes,
    },
    doc="contracts every axis x and y share; output (x - shared) + (y - shared)",
)


def _dld_infer(args, attrs):
    x, y = args
    if not (1 <= len(x.axes) <= 2 and 1 <= len(y.axes) <= 2):
        raise OpError(f"DotLowDimension takes 1-D or 2-D operands, got {x.axes!r} and {y.axes!r}")
    if x.axes.lengths[-1] != y.axes.lengths[0]:
        raise OpError(f"DotLowDimension: {x.axes!r} and {y.axes!r} do not contract")
    shape = x.axes.lengths[:-1] + y.axes.lengths[1:]
    if attrs["axes"].lengths != shape:
        raise OpError(f"DotLowDimension: output axes {attrs['axes']!r} do not have shape {shape}")
    return attrs["axes"], result_dtype("DotLowDimension", args)


def _dld(a, b, axes):
    return make_node("DotLowDimension", (a, b), axes=axes)


def _outer(a, b, axes):
    unit = make_axis(1)
    return _dld(F.broadcast(a, a.axes + unit), F.broadcast(b, unit + b.axes), axes)


def _dld_grad(node, d):
    x, y = node.args
    ranks = (len(x.axes), len(y.axes))
    if ranks == (2, 2):
        return _dld(d, F.transpose(y), x.axes), _dld(F.transpose(x), d, y.axes)
    if ranks == (2, 1):
        return _outer(d, y, x.axes), _dld(F.transpose(x), d, y.axes)
    if ranks == (1, 2):
        return _dld(y, d, x.axes), _outer(x, d, y.axes)
    unit = make_axis(1)
    du = F.broadcast(d, Axes((unit,)))
    return _dld(F.broadcast(y, y.axes + unit), du, x.axes), _dld(
        F.broadcast(x, x.axes + unit), du, y.axes
    )


register_op(
    "DotLowDimension",
    arity=2,
    attrs=(AttrSpec("axes", "axes"),),
    infer=_dld_infer,
    kernel=lambda node: np.matmul,
    grad=_dld_grad,
    gen=G.leaf_args(G.gen_dot_low),
    doc="np.dot of 1-D/2-D operands, with explicit output axes",
)
