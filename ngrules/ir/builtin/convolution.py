"""Convolution in ngraph's layout: inputs (C, D, H, W, N), filters (C, T, R, S, K), result
(K, M, P, Q, N); padding, strides and dilation per spatial axis. The three ops (forward, data
gradient, filter gradient) are bilinear and each one's gradient is built from the others.

`groups` G splits the channels: input channel group g (C/G of them) meets only output channel
group g (K/G), and filters hold C/G input channels (G = C is a depthwise convolution). One
attribute rather than G convolutions and a Concat: a depthwise layer of MobileNet has hundreds
of groups, and rules see one node."""

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
    out_lengths,
    padded,
    taps,
)
from ngrules.ir.graph import make_node
from ngrules.ir.ops import AttrSpec, register_op

_AXES = AttrSpec("axes", "axes", doc="the result's axes")
_GROUPS = AttrSpec("groups", "int", 1, doc="channel groups (C and K divisible by it)")
_ATTRS = GEOMETRY + (_AXES, _GROUPS)


def _geometry_of(node) -> dict:
    return {k: node.attrs[k] for k in ("padding", "strides", "dilation", "groups")}


def _conv_lengths(op, inputs, filters, attrs):
    """(input lengths, filter lengths, result lengths) after checking the layouts agree."""
    check_rank5(op, "the input", inputs)
    check_rank5(op, "the filter", filters)
    groups = attrs["groups"]
    if groups < 1 or filters[4].length % groups:
        raise OpError(f"{op}: groups={groups} must be >= 1 and divide the {filters[4]!r} filters")
    if groups == 1 and (inputs[0].name != filters[0].name or inputs[0].length != filters[0].length):
        raise OpError(f"{op}: input channel {inputs[0]!r} and filter channel {filters[0]!r} differ")
    if inputs[0].length != filters[0].length * groups:
        raise OpError(f"{op}: input channel {inputs[0]!r} is not {groups} groups of the filter "
                      f"channel {filters[0]!r}")
    spatial = out_lengths(op, inputs.lengths[1:4], filters.lengths[1:4], attrs)
    return (filters.lengths[4],) + spatial + (inputs.lengths[4],)


def _conv_infer(args, attrs):
    x, w = args
    want = _conv_lengths("Convolution", x.axes, w.axes, attrs)
    return check_result("Convolution", attrs["axes"], want), result_dtype("Convolution", args)


def _bprop_data_infer(args, attrs):
    delta, w = args
    want = _conv_lengths("ConvBpropData", attrs["axes"], w.axes, attrs)
    check_result("ConvBpropData", delta.axes, want)
    return attrs["axes"], result_dtype("ConvBpropData", args)


def _update_infer(args, attrs):
    delta, x = args
    want = _conv_lengths("ConvUpdate", x.axes, attrs["axes"], attrs)
    check_result("ConvUpdate", delta.axes, want)
    return attrs["axes"], result_dtype("ConvUpdate", args)


def _split(a: np.ndarray, groups: int) -> np.ndarray:
    """(C, ...) as (G, C/G, ...)."""
    return a.reshape((groups, a.shape[0] // groups) + a.shape[1:])


def _tap(f: np.ndarray, groups: int) -> np.ndarray:
    """A filter tap (C/G, K) as (C/G, G, K/G)."""
    return f.reshape(f.shape[0], groups, f.shape[1] // groups)


def _forward(f, a, groups: int):
    """Sum over input channels of tap f (C/G, K) times window a (C, ...): (K, ...)."""
    if groups == 1:
        return np.tensordot(f, a, axes=([0], [0]))
    out = np.einsum("cgk,gc...->gk...", _tap(f, groups), _split(a, groups))
    return out.reshape((-1,) + out.shape[2:])


def _backward(f, d, groups: int):
    """Sum over output channels of tap f (C/G, K) times delta d (K, ...): (C, ...)."""
    if groups == 1:
        return np.tensordot(f, d, axes=([1], [0]))
    out = np.einsum("cgk,gk...->gc...", _tap(f, groups), _split(d, groups))
    return out.reshape((-1,) + out.shape[2:])


def _filter(a, d, groups: int):
    """Window a (C, ...) against delta d (K, ...) over the rest: a filter tap (C/G, K)."""
    if groups == 1:
        return np.tensordot(a, d, axes=([1, 2, 3, 4], [1, 2, 3, 4]))
    out = np.einsum("gcdhwn,gkdhwn->cgk", _split(a, groups), _split(d, groups))
    return out.reshape(out.shape[0], -1)


def _conv_kernel(node):
    x, w = node.args
    window, out_shape = w.axes.lengths[1:4], node.axes.lengths
    groups = node.attrs["groups"]

    def run(a, f):
        a = padded(a, node.attrs)
        out = np.zeros(out_shape, np.result_type(a, f))
        for (t, r, s), where in taps(window, node.attrs, out_shape[1:4]):
            out += _forward(f[:, t, r, s, :], a[where], groups)
        return out

    return run


def _bprop_data_kernel(node):
    delta, w = node.args
    window, in_shape = w.axes.lengths[1:4], node.axes.lengths
    pad, groups = node.attrs["padding"], node.attrs["groups"]
    shape = (in_shape[0],) + tuple(n + 2 * p for n, p in zip(in_shape[1:4], pad)) + in_shape[4:]

    def run(d, f):
        out = np.zeros(shape, np.result_type(d, f))
        for (t, r, s), where in taps(window, node.attrs, d.shape[1:4]):
            out[where] += _backward(f[:, t, r, s, :], d, groups)
        return cropped(out, node.attrs)

    return run


def _update_kernel(node):
    delta, x = node.args
    w_shape, groups = node.axes.lengths, node.attrs["groups"]

    def run(d, a):
        a = padded(a, node.attrs)
        out = np.zeros(w_shape, np.result_type(d, a))
        for (t, r, s), where in taps(w_shape[1:4], node.attrs, d.shape[1:4]):
            out[:, t, r, s, :] = _filter(a[where], d, groups)
        return out

    return run


def _make(op, args, axes, node):
    return make_node(op, args, axes=axes, **_geometry_of(node))


def _conv_grad(node, d):
    x, w = node.args
    return _make("ConvBpropData", (d, w), x.axes, node), _make("ConvUpdate", (d, x), w.axes, node)


def _bprop_data_grad(node, e):
    """<e, B(d, w)> = <conv(e, w), d>: adjoints conv(e, w) for d and U(d, e) for w."""
    d, w = node.args
    return _make("Convolution", (e, w), d.axes, node), _make("ConvUpdate", (d, e), w.axes, node)


def _update_grad(node, e):
    """<e, U(d, x)> = <conv(x, e), d>: adjoints conv(x, e) for d and B(d, e) for x."""
    d, x = node.args
    return _make("Convolution", (x, e), d.axes, node), _make("ConvBpropData", (d, e), x.axes, node)


for _name, _infer, _kernel, _grad, _doc in (
    ("Convolution", _conv_infer, _conv_kernel, _conv_grad,
     "cross-correlation of inputs (C, D, H, W, N) with filters (C, T, R, S, K)"),
    ("ConvBpropData", _bprop_data_infer, _bprop_data_kernel, _bprop_data_grad,
     "the adjoint of Convolution for its input, from (delta, filters)"),
    ("ConvUpdate", _update_infer, _update_kernel, _update_grad,
     "the adjoint of Convolution for its filters, from (delta, inputs)"),
):  # fmt: skip
    register_op(
        _name,
        arity=2,
        attrs=_ATTRS,
        infer=_infer,
        kernel=_kernel,
        grad=_grad,
        gen=G.leaf_args(G.gen_convolution(_name)),
        doc=_doc,
    )
