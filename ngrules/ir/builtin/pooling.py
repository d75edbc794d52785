"""Pooling in ngraph's layout: inputs (C, D, H, W, N), result (C, M, P, Q, N); `mode` is "max"
or "avg" (the mean over the whole window, padding zeros included); a window per spatial axis,
padding and strides. BpropPool routes delta back: to the first maximum of each window, or
evenly over it."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import opgen as G
from ngrules.ir.builtin.common import result_dtype
from ngrules.ir.builtin.windows import (
    GEOMETRY,
    check_rank5,
    check_result,
    cropped,
    geometry,
    out_lengths,
    padded,
    taps,
    triple,
)
from ngrules.ir.graph import make_node
from ngrules.ir.ops import AttrSpec, NotDifferentiable, register_op

_ATTRS = (
    AttrSpec("mode", "str", "max", "max or avg (ngraph's pool_params op)"),
    triple("window", 1, "the window's extent along D, H, W"),
    *GEOMETRY[:2],
    AttrSpec("axes", "axes", doc="the result's axes"),
)


def _pool_lengths(op, x_axes, attrs):
    check_rank5(op, "the input", x_axes)
    if attrs["mode"] not in ("max", "avg"):
        raise OpError(f"{op}: op must be 'max' or 'avg', got {attrs['mode']!r}")
    window = attrs["window"]
    if window.shape != (3,) or (window < 1).any():
        raise OpError(f"{op}: window needs 3 values (d, h, w) >= 1, got {window.tolist()}")
    padding = geometry(attrs)[0]  # checked first: numpy would not compare a wrong length
    if any(p >= k for p, k in zip(padding, window.tolist())):
        raise OpError(f"{op}: padding must be smaller than the window (so no window is all pad)")
    spatial = out_lengths(op, x_axes.lengths[1:4], window.tolist(), attrs)
    return (x_axes.lengths[0],) + spatial + (x_axes.lengths[4],)


def _pool_infer(args, attrs):
    (x,), axes = args, attrs["axes"]
    check_result("Pooling", axes, _pool_lengths("Pooling", x.axes, attrs))
    if axes[0].name != x.axes[0].name:
        raise OpError(f"Pooling: the result's channel {axes[0]!r} must be {x.axes[0]!r}")
    return axes, x.dtype


def _bprop_infer(args, attrs):
    delta, x = args
    check_result("BpropPool", delta.axes, _pool_lengths("BpropPool", x.axes, attrs))
    return check_result("BpropPool", attrs["axes"], x.axes.lengths), result_dtype("BpropPool", args)


def _lowest(dtype):
    """The padding of a max window: below every value of `dtype` (False for booleans)."""
    if dtype.kind == "f":
        return -np.inf
    return False if dtype.kind == "b" else np.iinfo(dtype).min


def _windows(node, out_spatial):
    return taps(node.attrs["window"].tolist(), node.attrs, out_spatial)


def _pool_kernel(node):
    out_shape, is_max = node.axes.lengths, node.attrs["mode"] == "max"
    size = float(np.prod(node.attrs["window"]))

    def run(a):
        a = padded(a, node.attrs, _lowest(a.dtype) if is_max else 0)
        out = np.full(out_shape, _lowest(a.dtype), a.dtype) if is_max else None
        for _, where in _windows(node, out_shape[1:4]):
            if is_max:
                np.maximum(out, a[where], out=out)
            else:
                out = a[where].astype(np.float64) if out is None else out + a[where]
        return out if is_max else (out / size).astype(a.dtype)

    return run


def _bprop_kernel(node):
    is_max = node.attrs["mode"] == "max"
    size = float(np.prod(node.attrs["window"]))

    def run(d, a):
        a = padded(a, node.attrs, _lowest(a.dtype) if is_max else 0)
        grad = np.zeros(a.shape, np.result_type(d, a))
        windows = list(_windows(node, d.shape[1:4]))
        if is_max:
            best = np.max([a[where] for _, where in windows], axis=0)
            taken = np.zeros(d.shape, bool)
            for _, where in windows:
                hit = (a[where] == best) & ~taken
                grad[where] += d * hit
                taken |= hit
        else:
            share = d / size  # each window's every element gets an equal share
            for _, where in windows:
                grad[where] += share
        return cropped(grad, node.attrs)

    return run


def _attrs_of(node) -> dict:
    return {k: node.attrs[k] for k in ("mode", "window", "padding", "strides")}


register_op(
    "Pooling",
    arity=1,
    attrs=_ATTRS,
    infer=_pool_infer,
    kernel=_pool_kernel,
    grad=lambda n, d: (
        make_node("BpropPool", (d, n.args[0]), axes=n.args[0].axes, **_attrs_of(n)),
    ),
    gen=G.leaf_args(G.gen_pooling("Pooling")),
    doc="max or mean over windows of the spatial axes D, H, W",
)
register_op(
    "BpropPool",
    arity=2,
    attrs=_ATTRS,
    infer=_bprop_infer,
    kernel=_bprop_kernel,
    grad=NotDifferentiable("second derivatives of pooling are not supported"),
    gen=G.leaf_args(G.gen_pooling("BpropPool")),
    doc="the adjoint of Pooling for its input, from (delta, inputs)",
)
