"""Front-end builders for network pieces: softmax, cross-entropy, one_hot, argmax/argmin.
Re-exported by `ngrules.ir.frontend`."""

from __future__ import annotations

from ngrules.ir.axes import Axes, AxesLike, make_axes
from ngrules.ir.graph import Node, make_node


def default_axes(x: Node) -> Axes:
    """ngraph's default normalization/reduction axes: every axis but batch and recurrent."""
    return x.axes.sample_axes()


def softmax(x: Node, normalization_axes: AxesLike | None = None) -> Node:
    """exp(x - max(x)) / sum(...) over normalization_axes (default: all but N and REC)."""
    axes = default_axes(x) if normalization_axes is None else make_axes(normalization_axes)
    return make_node("Softmax", (x,), normalization_axes=axes)
