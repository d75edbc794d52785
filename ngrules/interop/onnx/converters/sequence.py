"""ONNX ops of recent sequence models, from primitives: CausalConvWithState (a depthwise
convolution along the sequence over the past state and the input joined, each channel its own
kernel: a sum over the taps; the new state is the last k - 1 steps) and SwiGLU
(swish(a) * b)."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.context import Context, converter
from ngrules.interop.onnx.converters.shape import cut, join
from ngrules.interop.onnx.shaping import Tensor, conform, fit, squeeze, temp_axis
from ngrules.ir import builders as F
from ngrules.ir.graph import Node


def _swish(x: Node, alpha: float = 1.0) -> Node:
    return x * F.sigmoid(x * alpha if alpha != 1.0 else x)


@converter("CausalConvWithState")
def _causal_conv(ctx: Context):
    x, w = ctx.x(0), ctx.x(1)
    batch, channel, length = x.axes
    k = w.shape[2]
    activation = ctx.attr("activation", "none")
    if activation not in ("none", "silu", "swish"):
        raise ctx.unsupported(f"activation {activation!r}")
    if k == 1 and (ctx.has(3) or len(ctx.node.output) > 1 and ctx.node.output[1]):
        raise ctx.unsupported("a kernel of size 1 (its state has length 0)")
    if ctx.has(3):
        past = conform(ctx.x(3), (batch, channel, temp_axis(k - 1)))
    elif k > 1:
        zeros = (batch, channel, temp_axis(k - 1))
        past = Tensor(F.constant(0, zeros, dtype=x.node.dtype), zeros)
    else:
        past = None
    padded = join([past, x], 2, temp_axis(length.length + k - 1)) if past else x
    w = conform(w, (channel, temp_axis(1), temp_axis(k)))
    total = None
    for r in range(k):
        tap = cut(w, 2, r, r + 1, temp_axis(1))
        tap = squeeze(tap.node, list(tap.axes[1:]))
        term = cut(padded, 2, r, r + length.length, length).node * F.broadcast(tap, x.node.axes)
        total = term if total is None else total + fit(term, total.axes)
    if ctx.has(2):
        total = total + F.broadcast(conform(ctx.x(2), (channel,)).node, total.axes)
    if activation != "none":  # in float32 at least, as ONNX computes it
        work = np.promote_types(total.dtype, np.float32)
        total = F.cast(_swish(F.cast(total, work)), total.dtype)
    outs = [Tensor(total, x.axes)]
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        size = padded.shape[2]
        outs.append(conform(cut(padded, 2, size - (k - 1), size, temp_axis(k - 1)),
                            ctx.out_axes(1)))
    return outs


@converter("SwiGLU")
def _swiglu(ctx: Context):
    a, b = ctx.x(0), ctx.x(1)
    b = conform(b, a.axes)
    return [Tensor(_swish(a.node, float(ctx.attr("alpha", 1.0))) * b.node, a.axes)]
