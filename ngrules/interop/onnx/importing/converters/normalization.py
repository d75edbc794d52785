"""ONNX normalisations written from primitives (means, variances, `Sqrt`, `Reciprocal`, as
`LayerNormalization`'s converter writes them): InstanceNormalization, GroupNormalization,
RMSNormalization, MeanVarianceNormalization, LpNormalization, LRN (its window sum over channels
a `Dot` with a band of ones), GlobalLpPool."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.nn import keep_dims
from ngrules.interop.onnx.importing.shaping import Tensor, broadcast_to, conform, reshape, temp_axis
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes
from ngrules.ir.graph import Node


def _standardised(x: Node, red, eps: float) -> Node:
    """(x - mean) / sqrt(variance + eps) over the axes `red`."""
    kept = x.axes - Axes(red)
    mean = F.mean(x, out_axes=kept)
    inv = F.reciprocal(F.sqrt(F.variance(x, out_axes=kept) + eps))
    return (x - mean) * inv


def _per_channel(ctx: Context, i: int, x: Tensor) -> Node:
    """Input i (one value per channel) broadcast over x."""
    return F.broadcast(conform(ctx.x(i), (x.axes[1],)).node, x.node.axes)


@converter("InstanceNormalization")
def _instance_norm(ctx: Context):
    x = ctx.x(0)
    y = _standardised(x.node, x.axes[2:], float(ctx.attr("epsilon", 1e-5)))
    y = y * _per_channel(ctx, 1, x) + _per_channel(ctx, 2, x)
    return [Tensor(y, x.axes)]


@converter("GroupNormalization")
def _group_norm(ctx: Context):
    """Channels split into num_groups, each standardised over its channels and the spatial
    dimensions; scale and bias per channel (opset 21) or per group (opset 18)."""
    x = ctx.x(0)
    groups = int(ctx.attr("num_groups"))
    n, c = x.shape[:2]
    group, inner = temp_axis(groups), temp_axis(c // groups)
    split_axes = (x.axes[0], group, inner) + x.axes[2:]
    split = Tensor(reshape(x, split_axes), split_axes)
    y = _standardised(split.node, split_axes[2:], float(ctx.attr("epsilon", 1e-5)))
    y = Tensor(reshape(Tensor(y, split_axes), x.axes), x.axes)
    if ctx.x(1).shape[0] == c:
        scale, bias = _per_channel(ctx, 1, y), _per_channel(ctx, 2, y)
    else:  # one value per group: repeated over the group's channels
        spread = [F.broadcast(conform(ctx.x(i), (group,)).node, Axes((group, inner)))
                  for i in (1, 2)]
        scale, bias = (F.broadcast(reshape(Tensor(s, (group, inner)), (x.axes[1],)),
                                   y.node.axes) for s in spread)
    return [Tensor(y.node * scale + bias, x.axes)]


@converter("RMSNormalization")
def _rms_norm(ctx: Context):
    x = ctx.x(0)
    axis = ctx.attr("axis", -1) % len(x.axes)
    red = list(x.axes[axis:])
    mean_square = F.mean(F.square(x.node), reduction_axes=red)
    inv = F.reciprocal(F.sqrt(mean_square + float(ctx.attr("epsilon", 1e-5))))
    y = x.node * F.broadcast(inv, x.node.axes) * broadcast_to(ctx.x(1), x.axes)
    return [Tensor(y, x.axes)]


@converter("MeanVarianceNormalization")
def _mvn(ctx: Context):
    """(x - mean) / (sqrt(variance) + 1e-9) over `axes` (ONNX's function body)."""
    x = ctx.x(0)
    red = [x.axes[int(a) % len(x.axes)] for a in ctx.attr("axes", [0, 2, 3])]
    kept = x.node.axes - Axes(red)
    std = F.sqrt(F.variance(x.node, out_axes=kept)) + 1e-9
    return [Tensor((x.node - F.mean(x.node, out_axes=kept)) / std, x.axes)]


def _lp_norm(x: Node, red, p: int) -> Node:
    if p == 1:
        return F.sum(F.absolute(x), reduction_axes=red)
    if p == 2:
        return F.sqrt(F.sum(F.square(x), reduction_axes=red))
    return F.power(F.sum(F.power(F.absolute(x), float(p)), reduction_axes=red), 1.0 / p)


@converter("LpNormalization")
def _lp_normalization(ctx: Context):
    x = ctx.x(0)
    axis = x.axes[ctx.attr("axis", -1) % len(x.axes)]
    norm = _lp_norm(x.node, [axis], int(ctx.attr("p", 2)))
    one = F.constant(1, dtype=norm.dtype)
    norm = F.where(F.equal(norm, F.constant(0, dtype=norm.dtype)), one, norm)  # 0 / 1 = 0
    return [Tensor(x.node / F.broadcast(norm, x.node.axes), x.axes)]


@converter("GlobalLpPool")
def _global_lp_pool(ctx: Context):
    x = ctx.x(0)
    positions = list(range(2, len(x.axes)))
    norm = _lp_norm(x.node, [x.axes[i] for i in positions], int(ctx.attr("p", 2)))
    return [keep_dims(ctx.out_axes(0), x, norm, positions)]


@converter("LRN")
def _lrn(ctx: Context):
    """x / (bias + alpha / size * window sum of x^2 over neighbouring channels) ** beta."""
    x = ctx.x(0)
    size = int(ctx.attr("size"))
    alpha, beta = float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75))
    bias = float(ctx.attr("bias", 1.0))
    c = x.shape[1]
    low, high = (size - 1) // 2, size - 1 - (size - 1) // 2
    i, j = np.arange(c)[:, None], np.arange(c)[None, :]
    band = ((i >= j - low) & (i <= j + high)).astype(x.node.dtype)
    target = temp_axis(c)
    sums = F.dot(F.square(x.node), F.constant(band, [x.axes[1], target], dtype=x.node.dtype))
    sums = conform(Tensor(sums, (x.axes[0], target) + x.axes[2:]), x.axes).node
    denominator = F.power(sums * (alpha / size) + bias, beta)
    return [Tensor(x.node / denominator, x.axes)]
