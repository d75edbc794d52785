"""ONNX Attention (opset 23) from primitives: softmax(Q K^T * scale + mask) V per head, with
grouped key/value heads (a query head h reads key head h // (q_heads / kv_heads)), a past key
and value concatenated before the new ones, a causal mask aligned to the end, softcap. 3-D
inputs are split into heads first. The scores are products summed over the head dimension
(a Dot would contract the batch and head axes the operands share too)."""

from __future__ import annotations

import math

import numpy as np

from ngrules.interop.onnx import ShapeMismatch
from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.shape import join
from ngrules.interop.onnx.importing.shaping import (
    Tensor,
    broadcast_to,
    conform,
    fit,
    reshape,
    temp_axis,
)
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
    stages = [scores]  # qk_matmul_output modes 0 and 1 (scaled, softcapped), 2, 3
    scores = scores + _mask(ctx, score_axes, (batch, heads, seq, total), groups, kv_heads,
                            scores.dtype)
    weights = _softmax(scores, total, guard=ctx.has(3) or ctx.has(6))
    stages += [scores, weights]
    value_size = v.axes[3]
    value = F.cast_axes(v.node, Axes(a if a != v.axes[2] else total for a in v.node.axes))
    y = _contract(weights, value, total)  # (batch, kv, group, seq, value size)
    merged = (batch, heads, seq, value_size)
    y = Tensor(reshape(Tensor(y, (batch, kv_heads, group, seq, value_size)), merged), merged)
    if len(ctx.x(0).axes) == 3:
        y = Tensor(y.node, (batch, seq, heads, value_size))
        y = Tensor(reshape(y, ctx.out_axes(0)), ctx.out_axes(0))
    outs[0] = y
    if len(ctx.node.output) > 3 and ctx.node.output[3]:
        stage = stages[max(ctx.attr("qk_matmul_output_mode", 0) - 1, 0)]
        full = (batch, heads, seq, total)
        outs.append(Tensor(reshape(Tensor(stage, score_axes), full), full))
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


def _padded_mask(given: Tensor, keys: int) -> Tensor:
    """An attn_mask shorter than the keys masks the keys after it (False, or -inf)."""
    width = keys - given.shape[-1]
    if width <= 0:
        return given
    fill = False if given.node.dtype == np.bool_ else -np.inf
    rest = given.axes[:-1] + (temp_axis(width),)
    pad = Tensor(F.broadcast(F.constant(fill, dtype=given.node.dtype), Axes(rest)), rest)
    return join([given, pad], len(rest) - 1, temp_axis(keys))


def _mask(ctx: Context, score_axes, full_axes, groups: int, kv_heads, dtype) -> Node:
    """The additive mask on the scores: attn_mask (bool: 0 or -inf; float: added), the causal
    mask and the sliding window, both aligned to the end of the keys."""
    batch, heads, seq, total = full_axes
    mask = F.broadcast(F.constant(0, dtype=dtype), Axes(score_axes))
    if ctx.has(3):
        given = _padded_mask(ctx.x(3), total.length)
        node = broadcast_to(given, full_axes)
        if node.dtype == np.bool_:
            node = F.where(node, F.constant(0, dtype=dtype), F.constant(-np.inf, dtype=dtype))
        grouped = _grouped(Tensor(node, full_axes), groups, kv_heads)
        mask = mask + fit(F.cast_axes(grouped.node, Axes(
            a if a != grouped.axes[2] else score_axes[2] for a in grouped.node.axes)),
            Axes(score_axes))
    i, j = np.arange(seq.length)[:, None], np.arange(total.length)[None, :]
    if ctx.has(6):  # the keys' lengths per batch: a query i sits at i + length - S
        return mask + fit(_ragged_mask(ctx, batch, seq, total, i, j, dtype), Axes(score_axes))
    offset = ctx.x(4).shape[2] if ctx.has(4) else 0
    allowed = np.ones((seq.length, total.length), bool)
    if ctx.attr("is_causal", 0):  # a query i sees keys j <= i + the past's length
        allowed &= j <= i + offset
    left, right = ctx.attr("left_window_size", -1), ctx.attr("right_window_size", -1)
    if left >= 0:  # and, in a sliding window, keys no further than `left` before it
        allowed &= i + offset - j <= left
    if right >= 0:
        allowed &= j - i - offset <= right
    if not allowed.all():
        band = np.where(allowed, 0.0, -np.inf).astype(dtype)
        mask = mask + F.broadcast(F.constant(band, [seq, total], dtype=dtype), Axes(score_axes))
    return mask


def _ragged_mask(ctx: Context, batch, seq, total, i, j, dtype) -> Node:
    """nonpad_kv_seqlen's mask: key j is read when j < length[b]; the causal mask and the
    window are aligned to each batch's own end (offset length[b] - S)."""
    length = conform(ctx.x(6), (batch,)).node
    lead = seq.length

    def table(values) -> Node:
        return F.constant(np.broadcast_to(values, (seq.length, total.length)).astype(
            length.dtype), [seq, total], dtype=length.dtype)

    allowed = F.less(table(j), length)
    if ctx.attr("is_causal", 0):
        allowed = F.logical_and(allowed, F.less_equal(table(j - i + lead), length))
    left, right = ctx.attr("left_window_size", -1), ctx.attr("right_window_size", -1)
    if left >= 0:
        allowed = F.logical_and(allowed, F.less_equal(length, table(left + j - i + lead)))
    if right >= 0:
        allowed = F.logical_and(allowed, F.less_equal(table(j - i + lead - right), length))
    return F.where(allowed, F.constant(0, dtype=dtype), F.constant(-np.inf, dtype=dtype))
