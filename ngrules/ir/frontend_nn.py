"""Front-end builders for network pieces: softmax, cross-entropy, one_hot, argmax/argmin,
axis_index.
Re-exported by `ngrules.ir.frontend`."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import frontend as F
from ngrules.ir.axes import Axes, AxesLike, Axis, make_axes
from ngrules.ir.graph import Node, make_node


def default_axes(x: Node) -> Axes:
    """ngraph's default normalization/reduction axes: every axis but batch and recurrent."""
    return x.axes.sample_axes()


def softmax(x: Node, normalization_axes: AxesLike | None = None) -> Node:
    """exp(x - max(x)) / sum(...) over normalization_axes (default: all but N and REC)."""
    axes = default_axes(x) if normalization_axes is None else make_axes(normalization_axes)
    return make_node("Softmax", (x,), normalization_axes=axes)


# -- cross-entropy (ngraph's composites, with their optimised forms) ----------------------------
#: ngraph's safelog cutoff: logs are clipped at -50, and x is offset by exp(-50).
SAFELOG_CUTOFF = 50.0


def safelog(x: Node, limit: float = -SAFELOG_CUTOFF) -> Node:
    """log(x + exp(limit)), clipped below at limit (ngraph's safelog)."""
    return F.maximum(F.log(x + float(np.exp(limit))), limit)


def _check_broadcastable(y: Node, t: Node) -> None:
    if not (y.axes.is_sub_set(t.axes) or y.axes.is_super_set(t.axes)):
        raise OpError(f"y and t must broadcast to matching axes: {y.axes!r} vs {t.axes!r}")


def _in_bits(x: Node, usebits: bool) -> Node:
    return x * float(1.0 / np.log(2.0)) if usebits else x


def cross_entropy_multi(
    y: Node,
    t: Node,
    usebits: bool = False,
    out_axes: AxesLike | None = None,
    enable_softmax_opt: bool = True,
    enable_diff_opt: bool = True,
) -> Node:
    """-sum(safelog(y) * t) over all but out_axes (default: keep N and REC).

    When y is a Softmax and enable_softmax_opt is set, ngraph's simpler form from the softmax's
    input: min(-sum(x' * t) + log(sum(exp(x'))), 50) with x' = x - max(x) (it needs sum(t) = 1).
    enable_diff_opt is accepted for ngraph's signature: autodiff differentiates the graph built.
    """
    _check_broadcastable(y, t)
    if out_axes is None:
        out_axes = y.axes - default_axes(y)
    if enable_softmax_opt and y.op == "Softmax":
        norm = y.attrs["normalization_axes"]
        x = y.args[0]
        shifted = x - F.max(x, reduction_axes=norm)
        s = -F.sum(shifted * t, out_axes=out_axes)
        value = F.minimum(s + F.log(F.sum(F.exp(shifted), reduction_axes=norm)), SAFELOG_CUTOFF)
    else:
        value = -F.sum(safelog(y) * t, out_axes=out_axes)
    return _in_bits(value, usebits)


def cross_entropy_binary_inner(
    y: Node, t: Node, enable_sig_opt: bool = True, enable_diff_opt: bool = True
) -> Node:
    """-(safelog(y) * t + safelog(1 - y) * (1 - t)) per element; when y is a Sigmoid of x and
    enable_sig_opt is set, ngraph's equivalent (1 - t) * max(x, -50) - safelog(y)."""
    _check_broadcastable(y, t)
    if enable_sig_opt and y.op == "Sigmoid":
        return (1.0 - t) * F.maximum(y.args[0], -SAFELOG_CUTOFF) - safelog(y)
    return -(safelog(y) * t + safelog(1.0 - y) * (1.0 - t))


def cross_entropy_binary(
    y: Node,
    t: Node,
    usebits: bool = False,
    out_axes: AxesLike | None = None,
    enable_sig_opt: bool = True,
    enable_diff_opt: bool = True,
) -> Node:
    """The binary cross-entropy summed over all but out_axes (default: keep N and REC)."""
    inner = cross_entropy_binary_inner(y, t, enable_sig_opt, enable_diff_opt)
    return _in_bits(F.sum(inner, out_axes=out_axes), usebits)


# -- positions -------------------------------------------------------------------------------------
def axis_index(x: Node, axis: Axis) -> Node:
    """0, 1, ..., n-1 along x's `axis` (int64), from x's shape: a length only known at run time
    (a symbolic sequence) stays so."""
    return make_node("AxisIndex", (x,), axis=axis)


# -- one-hot ---------------------------------------------------------------------------------------
def one_hot(x: Node, axis: Axis, dtype=np.float32) -> Node:
    """Class indices x (integers) as one-hot vectors along the new leading `axis`."""
    return make_node("OneHot", (x,), axis=axis, dtype=dtype)
