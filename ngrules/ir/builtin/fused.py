"""Fused ops: leaky relu forward/backward (ngraph's ReluOp, BpropReluOp), multi-output
selection, batchnorm forward/backward."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import frontend as F
from ngrules.ir import opgen as G
from ngrules.ir.axes import Axes, Axis
from ngrules.ir.builtin.common import elementwise_infer, result_dtype, same_axes
from ngrules.ir.graph import make_node
from ngrules.ir.ops import AttrSpec, NotDifferentiable, register_op


# -- fused leaky relu (ngraph's ReluOp and BpropReluOp) ------------------------------------------
def _slope_kernel(fn):
    def kernel(node):
        slope = node.attrs["slope"]
        return lambda *arrays: fn(slope, *arrays)

    return kernel


def _relu(slope, x):
    """`+ 0` makes the -0.0 of `x * 0` for a negative x the 0.0 that max(x, 0) gives."""
    return np.where(x > 0, x, x * slope) + 0


def _relu_bprop(slope, delta, x):
    return np.where(x > 0, delta, delta * slope) + 0


def _relu_grad(node, d):
    return (make_node("ReluBprop", (d, node.args[0]), slope=node.attrs["slope"]),)


def _relu_bprop_grad(node, d):
    """Linear in delta; piecewise constant in x, so x's adjoint is zero (almost everywhere)."""
    return make_node("ReluBprop", (d, node.args[1]), slope=node.attrs["slope"]), None


_SLOPE = (AttrSpec("slope", "float", 0.0, "the gradient where x <= 0"),)
for _name, _arity, _fn, _grad, _doc in (
    ("Relu", 1, _relu, _relu_grad, "max(x, 0) + slope * min(0, x)"),
    ("ReluBprop", 2, _relu_bprop, _relu_bprop_grad, "delta where x > 0, slope * delta elsewhere"),
):
    register_op(
        _name,
        arity=_arity,
        attrs=_SLOPE,
        infer=elementwise_infer(_name),
        kernel=_slope_kernel(_fn),
        grad=_grad,
        gen=G.leaf_args(G.gen_sloped(_name)),
        traits={"elementwise", "fused"},
        doc=_doc,
    )


# -- multi-output and fused batchnorm -----------------------------------------------------------
def _output_infer(args, attrs):
    (t,), i = args, attrs["index"]
    if t.outputs is None:
        raise OpError(f"Output: {t.op} has a single output")
    if not 0 <= i < len(t.outputs):
        raise OpError(f"Output: {t.op} has {len(t.outputs)} outputs, no index {i}")
    return t.outputs[i]


register_op(
    "Output",
    arity=1,
    attrs=(AttrSpec("index", "int"),),
    infer=_output_infer,
    kernel=lambda node: lambda t, i=node.attrs["index"]: t[i],
    grad=NotDifferentiable("autodiff routes Output adjoints to its multi-output node"),
    gen=G.gen_output,
    doc="output `index` of a multi-output node",
)


def _channel_axes(name, x: Axis, *per_channel) -> Axes:
    channel = Axes((x.axes[0],))
    for a in per_channel:
        if not same_axes(a.axes, channel):
            raise OpError(f"{name}: per-channel operand has axes {a.axes!r}, expected {channel!r}")
    return channel


def _bn_fprop_infer(args, attrs):
    x, gamma, beta = args
    if len(x.axes) < 2:
        raise OpError(f"BatchnormFprop needs a channel axis and at least one more, got {x.axes!r}")
    channel = _channel_axes("BatchnormFprop", x, gamma, beta)
    dt = result_dtype("BatchnormFprop", args)
    return (x.axes, dt), (channel, dt), (channel, dt)


def _by_channel(x):
    """x as a [channel, everything else] matrix (a view when x's layout allows)."""
    return x.reshape(x.shape[0], -1)


def _row_dots(a, b):
    """Per-row dot products of two matrices, in one pass and without a temporary."""
    return np.einsum("ij,ij->i", a, b)


def _bn_fprop_kernel(node):
    eps = node.attrs["eps"]

    def run(x, gamma, beta):
        flat = _by_channel(x)
        mean = flat.mean(axis=1)
        centred = flat - mean[:, None]
        var = _row_dots(centred, centred) / flat.shape[1]
        centred *= (gamma / np.sqrt(var + eps))[:, None]  # y = xhat * gamma + beta, in place
        centred += beta[:, None]
        return centred.reshape(x.shape), mean, var

    return run


def _bn_bprop_kernel(node):
    eps = node.attrs["eps"]

    def run(delta, x, gamma, mean, var):
        flat, d = _by_channel(x), _by_channel(delta)
        m = flat.shape[1]
        inv = 1.0 / np.sqrt(var + eps)
        centred = flat - mean[:, None]
        dbeta = d.sum(axis=1)
        dgamma = _row_dots(d, centred) * inv  # sum(delta * xhat)
        # dx = gamma*inv*(delta - (xhat*dgamma + dbeta)/m) = a*delta + b*(x - mean) + c
        a = gamma * inv
        centred *= (-a * inv * dgamma / m)[:, None]
        centred += (-a * dbeta / m)[:, None]
        centred += d * a[:, None]
        return centred.reshape(x.shape).astype(x.dtype, copy=False), dgamma, dbeta

    return run


def _plus(total, term):
    return term if total is None else total + term


def _bn_fprop_grad(node, deltas):
    """Adjoints of (y, mean, var) back to (x, gamma, beta)."""
    x, gamma, beta = node.args
    dy, dmean, dvar = deltas
    mean, var = make_node("Output", (node,), index=1), make_node("Output", (node,), index=2)
    dx = dgamma = dbeta = None
    if dy is not None:
        bp = make_node("BatchnormBprop", (dy, x, gamma, mean, var), eps=node.attrs["eps"])
        dx, dgamma, dbeta = (make_node("Output", (bp,), index=i) for i in range(3))
    m = float(x.axes.size // x.axes[0].length)
    if dmean is not None:
        dx = _plus(dx, F.broadcast(dmean / m, x.axes))
    if dvar is not None:
        centred = x - F.broadcast(mean, x.axes)
        dx = _plus(dx, F.broadcast(dvar * (2.0 / m), x.axes) * centred)
    return dx, dgamma, dbeta


def _bn_bprop_infer(args, attrs):
    delta, x, gamma, mean, var = args
    if not same_axes(delta.axes, x.axes) or len(x.axes) < 2:
        raise OpError(f"BatchnormBprop: delta {delta.axes!r} must have x's axes {x.axes!r}")
    channel = _channel_axes("BatchnormBprop", x, gamma, mean, var)
    dt = result_dtype("BatchnormBprop", args)
    return (x.axes, dt), (channel, dt), (channel, dt)


_EPS = (AttrSpec("eps", "float", 1e-3, "added to the variance inside the square root"),)
register_op(
    "BatchnormFprop",
    arity=3,
    attrs=_EPS,
    infer=_bn_fprop_infer,
    kernel=_bn_fprop_kernel,
    grad=_bn_fprop_grad,
    gen=G.leaf_args(G.gen_bn_fprop),
    traits={"multi_output", "fused"},
    outputs=3,
    doc="(y, mean, var) of batch normalisation over every axis but the first (channel)",
)
register_op(
    "BatchnormBprop",
    arity=5,
    attrs=_EPS,
    infer=_bn_bprop_infer,
    kernel=_bn_bprop_kernel,
    grad=NotDifferentiable("second derivatives of batchnorm are not supported"),
    gen=G.leaf_args(G.gen_bn_bprop),
    traits={"multi_output", "fused"},
    outputs=3,
    domain=("real", "real", "real", "real", "positive"),
    doc="(dx, dgamma, dbeta) of batch normalisation from delta, x, gamma, mean, var",
)
