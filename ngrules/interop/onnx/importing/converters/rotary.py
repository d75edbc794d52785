"""ONNX RotaryEmbedding from primitives: each pair (x1, x2) of a head's first rotary dimensions
is turned by the angle whose cosine and sine the caches hold for its position
(x1 cos - x2 sin, x1 sin + x2 cos). The pairs are the two halves of those dimensions, or
neighbours when `interleaved`; the caches are read at `position_ids` (a run-time `Gather`) or
given per batch and position."""

from __future__ import annotations

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.gather import run_time_gather
from ngrules.interop.onnx.importing.converters.shape import join, strided
from ngrules.interop.onnx.importing.shaping import Tensor, conform, reshape, temp_axis


def _by_position(ctx: Context, x: Tensor) -> Tensor:
    """x as (batch, sequence, heads, head size), whatever its layout."""
    if len(x.axes) == 4:  # (batch, heads, sequence, head size)
        return Tensor(x.node, (x.axes[0], x.axes[2], x.axes[1], x.axes[3]))
    heads = ctx.attr("num_heads", 0)
    if not heads:
        raise ctx.unsupported("a 3-D input without num_heads")
    b, s, hidden = x.shape
    axes = (x.axes[0], x.axes[1], temp_axis(heads), temp_axis(hidden // heads))
    return Tensor(reshape(x, axes), axes)


def _cache(ctx: Context, i: int, batch, seq, half) -> Tensor:
    """The cos (i=1) or sin (i=2) cache as (batch, sequence, half)."""
    cache, out = ctx.x(i), (batch, seq, half)
    if ctx.has(3):
        cache = conform(cache, (temp_axis(cache.shape[0]), half))
        return run_time_gather(cache, ctx.x(3), 0, out)
    return conform(cache, out)


@converter("RotaryEmbedding")
def _rotary(ctx: Context):
    x = _by_position(ctx, ctx.x(0))
    batch, seq, heads, size = x.axes
    rotary = ctx.attr("rotary_embedding_dim", 0) or size.length
    half = temp_axis(rotary // 2)
    if ctx.attr("interleaved", 0):
        x1, x2 = (strided(x, 3, k, rotary, 2, half) for k in (0, 1))
    else:
        x1, x2 = (strided(x, 3, k * half.length, (k + 1) * half.length, 1, half) for k in (0, 1))
    x2 = conform(x2, x1.axes)
    cos, sin = (_cache(ctx, i, batch, seq, x1.axes[3]).node for i in (1, 2))
    a, b = x1.node, x2.node
    turned = [Tensor(a * cos - b * sin, x1.axes), Tensor(a * sin + b * cos, x1.axes)]
    if ctx.attr("interleaved", 0):  # (..., half, 2) merged: real and imaginary alternate
        unit = temp_axis(1)
        pair = [Tensor(reshape(t, t.axes + (unit,)), t.axes + (unit,)) for t in turned]
        both = join(pair, 4, temp_axis(2))
        merged = x.axes[:3] + (temp_axis(rotary),)
        rotated = Tensor(reshape(both, merged), merged)
    else:
        rotated = join(turned, 3, temp_axis(rotary))
    if rotary < size.length:
        rest = strided(x, 3, rotary, size.length, 1, temp_axis(size.length - rotary))
        rotated = join([rotated, rest], 3, temp_axis(size.length))
    out = ctx.out_axes(0)
    if len(out) == 4:
        return [conform(Tensor(rotated.node, (rotated.axes[0], rotated.axes[2],
                                              rotated.axes[1], rotated.axes[3])), out)]
    return [Tensor(reshape(rotated, out), out)]
