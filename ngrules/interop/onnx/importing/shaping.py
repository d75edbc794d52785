"""Moving between ONNX's positions and ngrules' named axes: renaming, broadcasting, reshaping.

An imported ONNX value is a `Tensor`: an ngrules node and the node's axes in ONNX's positional
order (the node itself may hold them in any order; names, not positions, carry meaning).
Where the naming could not give two dimensions one axis, `rename` relabels an axis with a
full-range `Slice`, which computes nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ngrules.interop.onnx import ShapeMismatch
from ngrules.interop.onnx.importing.unify import reshape_groups
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes, Axis, FlattenedAxis
from ngrules.ir.graph import Node, make_node

_temp = itertools.count()


@dataclass(frozen=True)
class Tensor:
    """An ONNX value: a node and its axes in ONNX's order."""

    node: Node
    axes: tuple[Axis, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.length for a in self.axes)

    def ordered(self) -> Node:
        """The node with its axes in ONNX's order."""
        return F.axes_with_order(self.node, self.axes)


def temp_axis(length: int) -> Axis:
    return Axis(f"tmp{next(_temp)}", length)


def cast_axes(node: Node, mapping: dict[str, Axis]) -> Node:
    """The node with the axes named in `mapping` renamed (same lengths): one AxesCast."""
    return F.cast_axes(node, Axes(mapping.get(a.name, a) for a in node.axes))


def rename(node: Node, old: Axis, new: Axis) -> Node:
    """The node with axis `old` called `new` (same length)."""
    return cast_axes(node, {old.name: new})


def mismatch(got: Sequence[int], want: Sequence[int], why: str) -> ShapeMismatch:
    return ShapeMismatch(f"an input of shape {tuple(got)} {why} {tuple(want)}")


def conform(t: Tensor, axes: Sequence[Axis]) -> Tensor:
    """The tensor with its positions renamed to `axes` (lengths must agree)."""
    axes = tuple(axes)
    lengths = tuple(a.length for a in axes)
    if t.shape != lengths:
        raise mismatch(t.shape, lengths, "where the model says")
    if t.axes == axes and all(a.length == b.length for a, b in zip(t.axes, axes)):
        return t
    return Tensor(cast_axes(t.node, {a.name: b for a, b in zip(t.axes, axes)}), axes)


def squeeze(node: Node, drop: Sequence[Axis]) -> Node:
    """The node without the given length-1 axes: a new constant when it is one, else a
    TensorSlice indexing position 0 of each (which keeps the dtype and computes nothing)."""
    drop = Axes(drop)
    if not len(drop):
        return node
    if any(a.length != 1 for a in drop):
        raise mismatch(node.axes.lengths, drop.lengths, "cannot drop the dimensions")
    keep = node.axes - drop
    if node.op == "Constant":
        value = np.asarray(node.attrs["value"]).reshape(keep.lengths)
        return F.constant(value, keep, dtype=value.dtype)
    inner = node.args[0] if node.op == "Broadcast" else None
    if inner is not None and inner.op == "Constant" and inner.axes.is_equal_set(keep):
        return F.axes_with_order(inner, keep)  # an Unsqueeze of a stored value, undone
    spec = np.array([(0, 1, 0) if a in drop else (0, a.length, 1) for a in node.axes], np.int64)
    return make_node("TensorSlice", (node,), slices=spec.reshape(len(node.axes), 3), axes=keep)


def fit(node: Node, axes: Sequence[Axis]) -> Node:
    """The node broadcast (or reordered) to exactly `axes`."""
    axes = Axes(axes)
    if node.axes.is_equal_set(axes):
        return F.axes_with_order(node, axes)
    return F.broadcast(node, axes)


def broadcast_to(t: Tensor, out: Sequence[Axis]) -> Node:
    """numpy broadcasting of t to the output axes `out` (t's dimensions align to the right)."""
    out = tuple(out)
    offset = len(out) - len(t.axes)
    if offset < 0:
        raise mismatch(t.shape, [a.length for a in out], "cannot broadcast to")
    drop, want = [], []
    for i, axis in enumerate(t.axes):
        target = out[offset + i]
        if axis.length == target.length:
            want.append(target)
        else:
            drop.append(axis)
    kept = Tensor(squeeze(t.node, drop), tuple(a for a in t.axes if a not in drop))
    return fit(conform(kept, tuple(want)).node, out)


def reshape(t: Tensor, out: Sequence[Axis]) -> Node:
    """t's data in row-major order laid out as `out` (Reshape, Flatten, Squeeze, Unsqueeze):
    Flatten where dimensions merge, Unflatten where they split, renames in between."""
    out = tuple(out)
    if np.prod(t.shape, dtype=object) != np.prod([a.length for a in out], dtype=object):
        raise mismatch(t.shape, [a.length for a in out], "cannot be reshaped to")
    ones = [a for a in t.axes if a.length == 1]
    src = [a for a in t.axes if a.length > 1]
    node = F.axes_with_order(squeeze(t.node, ones), src)
    dst = [a for a in out if a.length > 1]
    groups = reshape_groups([a.length for a in src], [a.length for a in dst])
    merged = [Axes(src[i0:i1]).flatten() if i1 > i0 else None for i0, i1, _, _ in groups]
    node = F.flatten(node, [m for m in merged if m is not None]) if len(src) else node
    targets, final = [], []
    for m, (_, _, j0, j1) in zip(merged, groups):
        parts = dst[j0:j1]
        if m is not None:
            targets.append(parts[0] if len(parts) == 1 else FlattenedAxis(parts))
            final.extend(parts)
    node = conform(Tensor(node, tuple(node.axes)), targets).node
    node = F.unflatten(node, final) if Axes(final) != node.axes else node
    return fit(node, out)
