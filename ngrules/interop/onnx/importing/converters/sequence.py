"""ONNX ops of recent sequence models, from primitives: CausalConvWithState (a depthwise
convolution along the sequence over the past state and the input joined, each channel its own
kernel: a sum over the taps; the new state is the last k - 1 steps) and SwiGLU
(swish(a) * b)."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.shape import cut, join
from ngrules.interop.onnx.importing.shaping import Tensor, conform, fit, reshape, squeeze, temp_axis
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


def _split_heads(t: Tensor, *sizes) -> Tensor:
    """(B, T, product of sizes) as (B, T, *sizes), new axes for the sizes."""
    axes = t.axes[:2] + tuple(temp_axis(n) for n in sizes)
    return Tensor(reshape(t, axes), axes)


def _at(t: Tensor, i: int) -> Node:
    """Step i of t's sequence (position 1), without that dimension."""
    step = cut(t, 1, i, i + 1, temp_axis(1))
    return squeeze(step.node, [step.axes[1]])


@converter("LinearAttention")
def _linear_attention(ctx: Context):
    """A state S (B, kv heads, Dk, Dv) carried over the sequence, in float32: decayed by
    exp(decay) (gated rules), the value corrected by beta * (v - S k) (delta rules), then
    S + k v^T; each query head reads q S * scale from its group's state."""
    rule = ctx.attr("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ctx.unsupported(f"update_rule {rule!r}")
    q_heads, kv_heads = ctx.attr("q_num_heads", 0), ctx.attr("kv_num_heads", 0)
    if not q_heads or not kv_heads or q_heads % kv_heads:
        raise ctx.unsupported(f"q_num_heads {q_heads} with kv_num_heads {kv_heads}")
    f32 = np.dtype(np.float32)
    ins = [Tensor(F.cast(t.node, f32), t.axes) for t in (ctx.x(0), ctx.x(1), ctx.x(2))]
    dk, dv = ins[0].shape[2] // q_heads, ins[2].shape[2] // kv_heads
    q = _split_heads(ins[0], kv_heads, q_heads // kv_heads, dk)
    batch, time, heads, group, size = q.axes
    k = conform(_split_heads(ins[1], kv_heads, dk), (batch, time, heads, size))
    v = _split_heads(ins[2], kv_heads, dv)
    v = conform(v, (batch, time, heads, v.axes[3]))
    value_size = v.axes[3]
    state_axes = (batch, heads, size, value_size)
    decay, beta = _per_head(ctx, 4, (batch, time, heads, size)), _per_head(
        ctx, 5, (batch, time, heads))
    if ctx.has(3):
        state = F.cast(conform(ctx.x(3), state_axes).node, f32)
    else:
        state = F.constant(0, state_axes, dtype=f32)
    scale = ctx.attr("scale", 0.0) or 1.0 / np.sqrt(dk)
    unit, steps = temp_axis(1), []
    for i in range(time.length):
        q_t, k_t, v_t = _at(q, i), _at(k, i), _at(v, i)
        if decay is not None:
            state = state * F.exp(_at(decay, i))
        if beta is not None:
            read = F.sum(state * k_t, reduction_axes=[size])
            v_t = _at(beta, i) * (v_t - read)
        state = fit(state + k_t * v_t, state_axes)
        y = F.sum(q_t * state, reduction_axes=[size]) * float(scale)
        steps.append(Tensor(F.broadcast(y, y.axes + [unit]), (batch, unit, heads, group,
                                                                value_size)))
    y = join(steps, 1, temp_axis(time.length)) if len(steps) > 1 else steps[0]
    out = ctx.out_axes(0)
    outs = [Tensor(F.cast(reshape(y, out), ctx.out_dtype(0)), out)]
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        outs.append(conform(Tensor(F.cast(state, ctx.out_dtype(1)), state_axes),
                            ctx.out_axes(1)))
    return outs


def _per_head(ctx: Context, i: int, full) -> Tensor | None:
    """decay (i=4: per kv head, or per head and key dimension) or beta (i=5: per kv head, or
    one for all) as float32 over `full`'s leading axes."""
    if not ctx.has(i):
        return None
    t = ctx.x(i)
    node = F.cast(t.node, np.float32)
    last = t.shape[2]
    if last == 1:
        return conform(Tensor(squeeze(node, [t.axes[2]]), t.axes[:2]), full[:2])
    if last == full[2].length:
        return conform(Tensor(node, t.axes), full[:3])
    return conform(_split_heads(Tensor(node, t.axes), full[2].length, last // full[2].length),
                   full)
