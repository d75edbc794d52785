"""ONNX Attention (opset 23) from primitives: softmax(Q K^T * scale + mask) V per head, with
grouped key/value heads (a query head h reads key head h // (q_heads / kv_heads)), a past key
and value concatenated before the new ones, a causal mask aligned to the end, softcap. 3-D
inputs are split into heads first. The scores are products summed over the head dimension
(a Dot would contract the batch and head axes the operands share too)."""

from __future__ import annotations

import math

import numpy as np

from ngrules.interop.onnx import ShapeMismatch
from ngrules.interop.onnx.context import Context, converter
from ngrules.interop.onnx.converters.shape import join
from ngrules.interop.onnx.shaping import Tensor, broadcast_to, conform, fit, reshape, temp_axis
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes
from ngrules.ir.graph import Node, make_node


def _heads(t: Tensor, heads: int | None) -> Tensor:
    """(B, heads, S, D): a 4-D input as it is; a 3-D (B, S, heads * D) one split and moved."""
    if len(t.axes) == 4:
        return t
    if len(t.axes) != 3 or not isinstance(heads, int) or heads < 1 or t.shape[2] % heads:
        raise ShapeMismatch(f"an input of shape {t.shape} cannot be split into {heads} heads")
    b, s, hidden = t.shape
    split = (t.axes[0], t.axes[1], temp_axis(heads), temp_axis(hidden // heads))
    t = Tensor(reshape(t, split), split)
    return Tensor(t.node, (split[0], split[2], split[1], split[3]))


def _with_past(ctx: Context, i: int, t: Tensor) -> Tensor:
    """Past key (value) input i joined before t along the sequence (position 2)."""
    if not ctx.has(i):
        return t
    return join([ctx.x(i), t], 2, temp_axis(ctx.x(i).shape[2] + t.shape[2]))


def _grouped(t: Tensor, groups: int, kv_heads) -> Tensor:
    """(B, H, S, D) with its H split into (kv heads, groups): (B, kv, G, S, D)."""
    g = temp_axis(groups)
    axes = (t.axes[0], kv_heads, g) + t.axes[2:]
    return Tensor(reshape(t, axes), axes)


def _contract(a: Node, b: Node, axis) -> Node:
    """sum over `axis` of a * b, both broadcast to their union."""
    union = a.axes | b.axes
    return F.sum(fit(a, union) * fit(b, union), reduction_axes=[axis])


@converter("Attention")
def _attention(ctx: Context):
    for i in range(1, 4):
        if i < len(ctx.node.output) and ctx.node.output[i] and i == 3:
            raise ctx.unsupported("the qk_matmul_output output")
    if ctx.has(6):
        raise ctx.unsupported("nonpad_kv_seqlen")
    for window in ("left_window_size", "right_window_size"):
        if ctx.attr(window, -1) != -1:
            raise ctx.unsupported(window)
    if ctx.x(0).node.dtype == np.float16:
        raise ctx.unsupported("float16 Attention (its rounding differs from ONNX's step by step)")
    q = _heads(ctx.x(0), ctx.attr("q_num_heads"))
    k = _with_past(ctx, 4, _heads(ctx.x(1), ctx.attr("kv_num_heads")))
    v = _with_past(ctx, 5, _heads(ctx.x(2), ctx.attr("kv_num_heads")))
    outs: list = [None, k, v]
    batch, heads, seq, size = q.axes
    kv_heads, total = k.axes[1], k.axes[2]
    k = conform(k, (batch, kv_heads, total, k.axes[3]))
    v = conform(v, (batch, kv_heads, total, v.axes[3]))
    groups = heads.length // kv_heads.length
    qg = _grouped(Tensor(q.node, (batch, heads, seq, size)), groups, kv_heads)
    group = qg.axes[2]
    key = F.cast_axes(k.node, Axes(a if a != k.axes[3] else size for a in k.node.axes))
    scale = ctx.attr("scale") or 1.0 / math.sqrt(size.length)
    scores = _contract(qg.node, key, size) * float(scale)
    score_axes = (batch, kv_heads, group, seq, total)
    softcap = ctx.attr("softcap", 0.0)
    if softcap and softcap > 0:
        scores = F.tanh(scores * (1.0 / softcap)) * softcap
    scores = fit(scores, score_axes)
    scores = scores + _mask(ctx, score_axes, (batch, heads, seq, total), groups, kv_heads,
                            scores.dtype)
    weights = _softmax(scores, total, guard=ctx.has(3))
    value_size = v.axes[3]
    value = F.cast_axes(v.node, Axes(a if a != v.axes[2] else total for a in v.node.axes))
    y = _contract(weights, value, total)  # (batch, kv, group, seq, value size)
    merged = (batch, heads, seq, value_size)
    y = Tensor(reshape(Tensor(y, (batch, kv_heads, group, seq, value_size)), merged), merged)
    if len(ctx.x(0).axes) == 3:
        y = Tensor(y.node, (batch, seq, heads, value_size))
        y = Tensor(reshape(y, ctx.out_axes(0)), ctx.out_axes(0))
    outs[0] = y
    return outs


def _softmax(scores: Node, total, guard: bool) -> Node:
    """Softmax over the keys; with `guard`, a row whose every key is masked (-inf) gives 0
    rather than 0 / 0."""
    if not guard:
        return make_node("Softmax", (scores,), normalization_axes=[total])
    top = F.broadcast(F.max(scores, reduction_axes=[total]), scores.axes)
    masked = F.equal(top, F.constant(-np.inf, dtype=scores.dtype))
    zero = F.broadcast(F.constant(0, dtype=scores.dtype), scores.axes)
    safe = make_node("Select", (masked, zero, scores))
    return make_node("Select", (masked, zero, make_node("Softmax", (safe,),
                                                        normalization_axes=[total])))


def _mask(ctx: Context, score_axes, full_axes, groups: int, kv_heads, dtype) -> Node:
    """The additive mask on the scores: attn_mask (bool: 0 or -inf; float: added) and the
    causal mask (a query i sees keys j <= i + the past's length)."""
    batch, heads, seq, total = full_axes
    mask = F.broadcast(F.constant(0, dtype=dtype), Axes(score_axes))
    if ctx.has(3):
        given = ctx.x(3)
        if given.shape[-1] != total.length:
            raise ctx.unsupported("an attn_mask shorter than the keys")
        node = broadcast_to(given, full_axes)
        if node.dtype == np.bool_:
            node = F.where(node, F.constant(0, dtype=dtype), F.constant(-np.inf, dtype=dtype))
        grouped = _grouped(Tensor(node, full_axes), groups, kv_heads)
        mask = mask + fit(F.cast_axes(grouped.node, Axes(
            a if a != grouped.axes[2] else score_axes[2] for a in grouped.node.axes)),
            Axes(score_axes))
    if ctx.attr("is_causal", 0):
        offset = ctx.x(4).shape[2] if ctx.has(4) else 0
        i, j = np.arange(seq.length)[:, None], np.arange(total.length)[None, :]
        causal = np.where(j <= i + offset, 0.0, -np.inf).astype(dtype)
        mask = mask + F.broadcast(F.constant(causal, [seq, total], dtype=dtype), Axes(score_axes))
    return mask
