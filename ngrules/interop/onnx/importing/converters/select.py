"""ONNX Compress and CenterCropPad: parts of a tensor chosen by constants (a condition, a
target shape) known at import, as slices, gathers and zero padding."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.conv import pad
from ngrules.interop.onnx.importing.converters.shape import cut
from ngrules.interop.onnx.importing.shaping import Tensor, conform, reshape, temp_axis
from ngrules.ir import builders as F
from ngrules.ir.graph import make_node


@converter("Compress")
def _compress(ctx: Context):
    """The slices where the (constant) condition holds, along `axis` or of the flattened input."""
    t = ctx.x(0)
    if not ctx.importer.shapes.known(ctx.node.output[0]):
        raise ctx.unsupported("an output shape that ONNX's shape inference leaves unknown")
    condition = np.ravel(ctx.need_const(1, "condition")).astype(bool)
    axis = ctx.attr("axis")
    if axis is None:
        flat = (temp_axis(int(np.prod(t.shape))),)
        t, pos = Tensor(reshape(t, flat), flat), 0
    else:
        pos = int(axis) % len(t.axes)
    chosen = np.flatnonzero(condition[: t.shape[pos]])
    if not len(chosen):
        raise ctx.unsupported("a condition that keeps nothing (a dimension of length 0)")
    axis_out = temp_axis(len(chosen))
    index = F.constant(chosen.astype(np.int64), [axis_out], dtype=np.int64)
    node = make_node("Gather", (t.node, index), axis=t.axes[pos])
    return [conform(Tensor(node, t.axes[:pos] + (axis_out,) + t.axes[pos + 1 :]),
                    ctx.out_axes(0))]


@converter("CenterCropPad")
def _center_crop_pad(ctx: Context):
    """Each listed dimension cropped (or zero-padded) to the target around its centre: the
    start loses (or gains) the smaller half, as ONNX's function does."""
    t = ctx.x(0)
    shape = [int(v) for v in np.ravel(ctx.need_const(1, "shape"))]
    positions = [int(a) % len(t.axes) for a in ctx.attr("axes") or range(len(t.axes))]
    for pos, target in zip(positions, shape):
        n = t.shape[pos]
        if target < n:
            start = (n - target) // 2
            t = cut(t, pos, start, start + target, temp_axis(target))
        elif target > n:
            before = (target - n) // 2
            t = pad(t, pos, before, target - n - before, 0.0)
    return [conform(t, ctx.out_axes(0))]
