"""ONNX layout ops: positions are relabelled (Transpose), regrouped (Reshape and friends),
cut (Slice, Split, Gather on constant indices) or joined (Concat)."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.importing.context import (
    READ_AS_FLATTEN,
    READ_AS_RESHAPE,
    Context,
    converter,
)
from ngrules.interop.onnx.importing.shaping import Tensor, broadcast_to, conform, reshape, temp_axis
from ngrules.ir.axes import Axes, Axis
from ngrules.ir.graph import make_node


@converter("Transpose")
def _transpose(ctx: Context):
    """Named axes need no data movement: only the positions change."""
    x = ctx.x(0)
    perm = ctx.attr("perm") or list(range(len(x.axes)))[::-1]
    return [Tensor(x.node, tuple(x.axes[p] for p in perm))]


@converter("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def _reshape(ctx: Context):
    """All four keep the row-major order of the data; only the output shape matters."""
    if not ctx.importer.shapes.known(ctx.node.output[0]):
        raise ctx.unsupported("an output shape that ONNX's shape inference leaves unknown")
    out = reshape(ctx.x(0), ctx.out_axes(0))
    if ctx.node.op_type in ("Reshape", "Flatten"):
        READ_AS_RESHAPE.add(out)  # written back as a Reshape, not the unit view it may be
        if ctx.node.op_type == "Flatten":
            READ_AS_FLATTEN.add(out)  # or as the Flatten it was
    return [ctx.result(out)]


@converter("Expand")
def _expand(ctx: Context):
    return [ctx.result(broadcast_to(ctx.x(0), ctx.out_axes(0)))]


def cut(t: Tensor, pos: int, start: int, stop: int, axis: Axis) -> Tensor:
    """t[..., start:stop, ...] at ONNX position pos, that dimension becoming `axis`."""
    node_pos = t.node.axes.index(t.axes[pos])
    if axis.name in t.node.axes.names:
        axis = temp_axis(axis.length)
    node = make_node("Slice", (t.node,), position=node_pos, start=start, stop=stop, axis=axis)
    return Tensor(node, t.axes[:pos] + (axis,) + t.axes[pos + 1 :])


def join(parts: list[Tensor], pos: int, axis: Axis) -> Tensor:
    """Concatenate at ONNX position pos into `axis`; the other positions take parts[0]'s axes."""
    if len(parts) == 1:
        return conform(parts[0], parts[0].axes[:pos] + (axis,) + parts[0].axes[pos + 1 :])
    first = parts[0].axes
    lined = []
    for p in parts:
        want = first[:pos] + (p.axes[pos],) + first[pos + 1 :]
        if p.axes[pos].name in {a.name for a in first if a is not first[pos]}:
            want = first[:pos] + (temp_axis(p.axes[pos].length),) + first[pos + 1 :]
        lined.append(conform(p, want).ordered())
    node = make_node("Concat", lined, axis=axis, position=pos)
    return Tensor(node, first[:pos] + (axis,) + first[pos + 1 :])


def strided(t: Tensor, pos: int, start: int, stop: int, step: int, axis: Axis) -> Tensor:
    """t[..., start:stop:step, ...] at ONNX position pos (step > 0), that dimension `axis`."""
    if step == 1:
        return cut(t, pos, start, stop, axis)
    node_pos = t.node.axes.index(t.axes[pos])
    if axis.name in t.node.axes.names:
        axis = temp_axis(axis.length)
    spec = [(0, a.length, 1) for a in t.node.axes]
    spec[node_pos] = (start, stop, step)
    out_axes = t.node.axes[:node_pos] + Axes((axis,)) + t.node.axes[node_pos + 1 :]
    node = make_node("TensorSlice", (t.node,), slices=np.array(spec, np.int64), axes=out_axes)
    return Tensor(node, t.axes[:pos] + (axis,) + t.axes[pos + 1 :])


def pick(t: Tensor, pos: int, indices) -> Tensor:
    """The given indices along position pos, as a new dimension of their count: one strided
    slice when they are evenly spaced upwards, else a Concat of single slices."""
    axis = temp_axis(len(indices))
    steps = {b - a for a, b in zip(indices, indices[1:])}
    if len(steps) <= 1 and min(steps, default=1) > 0:
        step = steps.pop() if steps else 1
        return strided(t, pos, indices[0], indices[-1] + 1, step, axis)
    parts = [cut(t, pos, i, i + 1, temp_axis(1)) for i in indices]
    return join(parts, pos, axis)


@converter("Concat")
def _concat(ctx: Context):
    out = ctx.out_axes(0)
    pos = ctx.attr("axis", 1) % len(out)  # Concat-1's default; required since opset 4
    parts = []
    for i in range(ctx.arity):
        t = ctx.x(i)
        if t.shape[pos] == 0:
            continue
        want = out[:pos] + (t.axes[pos],) + out[pos + 1 :]
        if t.axes[pos].name in {a.name for a in want[:pos] + want[pos + 1 :]}:
            want = out[:pos] + (temp_axis(t.shape[pos]),) + out[pos + 1 :]
        parts.append(conform(t, want))
    return [join(parts, pos, out[pos])]


def _slice_positions(ctx: Context, t: Tensor):
    """(position, start, stop, step) per sliced dimension, numpy-clamped."""
    if ctx.has(1) or ctx.op == "Slice" and ctx.arity > 1:
        starts, ends = ctx.need_const(1, "slice start"), ctx.need_const(2, "slice end")
        axes = ctx.const(3) if ctx.has(3) else np.arange(len(starts))
        steps = ctx.const(4) if ctx.has(4) else np.ones(len(starts), dtype=np.int64)
    else:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes = ctx.attr("axes") or list(range(len(starts)))
        steps = [1] * len(starts)
    for a, s, e, st in zip(axes, starts, ends, steps):
        pos = int(a) % len(t.axes)
        yield (pos, *slice(int(s), int(e), int(st)).indices(t.shape[pos]))


@converter("Slice")
def _slice(ctx: Context):
    t, out = ctx.x(0), ctx.out_axes(0)
    for pos, start, stop, step in _slice_positions(ctx, t):
        if step == 1 and stop > start:
            t = cut(t, pos, start, stop, out[pos])
        else:
            picked = list(range(start, stop, step))
            if not picked:
                raise ctx.unsupported("an empty slice")
            t = pick(t, pos, picked)
    return [conform(t, out)]


@converter("Split")
def _split(ctx: Context):
    t = ctx.x(0)
    pos = ctx.attr("axis", 0) % len(t.axes)
    outs, start = [], 0
    for i in range(len(ctx.node.output)):
        length = ctx.out_shape(i)[pos]
        outs.append(cut(t, pos, start, start + length, ctx.out_axes(i)[pos]))
        start += length
    return outs
