"""Front-end builders for slicing and axes, in ngraph's signatures: tensor_slice (and `x[...]`),
pad, expand_dims, cast_axes, concat_along_axis. Re-exported by `ngrules.ir.builders`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import frontend as F
from ngrules.ir.axes import Axes, AxesLike, Axis, make_axes
from ngrules.ir.graph import OPERATORS, Node, make_node


def _spec_row(item, axis: Axis) -> tuple[int, int, int]:
    """(start, stop, step) for one axis; step 0 for an integer index (which drops the axis)."""
    n = axis.length
    if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
        index = int(item) + n if item < 0 else int(item)
        if not 0 <= index < n:
            raise OpError(f"index {item} is out of range for {axis!r}")
        return index, index + 1, 0
    if not isinstance(item, slice):
        raise OpError(f"cannot slice {axis!r} with {item!r}; use an int or a slice")
    if item.step is not None and item.step <= 0:
        raise OpError(f"slice steps must be positive, got {item.step}")
    start, stop, step = item.indices(n)
    if len(range(start, stop, step)) == 0:
        raise OpError(f"slice {item} of {axis!r} is empty")
    return start, stop, step


def tensor_slice(x: Node, slices: Sequence, axes: AxesLike | None = None) -> Node:
    """x sliced by one int or slice per axis (ngraph's tensor_slice): an int removes its axis,
    a slice keeps the axis's name with the sliced length (unless `axes` names the result)."""
    slices = tuple(slices)
    if len(slices) != len(x.axes):
        raise OpError(f"tensor_slice needs one slice per axis of {x.axes!r}, got {len(slices)}")
    rows = [_spec_row(s, a) for s, a in zip(slices, x.axes)]
    if all(row == (0, a.length, 1) for row, a in zip(rows, x.axes)) and axes is None:
        return x
    if axes is None:
        axes = Axes(
            a if row == (0, a.length, 1) else Axis(a.name, len(range(*row)))
            for row, a in zip(rows, x.axes)
            if row[2]
        )
    spec = np.array(rows, np.int64).reshape(len(rows), 3)
    return make_node("TensorSlice", (x,), slices=spec, axes=make_axes(axes))


def getitem(x: Node, item) -> Node:
    """`x[item]`: as ngraph, missing trailing axes are taken whole."""
    item = item if isinstance(item, tuple) else (item,)
    if len(item) > len(x.axes):
        raise OpError(f"too many indices ({len(item)}) for {x.axes!r}")
    return tensor_slice(x, item + (slice(None),) * (len(x.axes) - len(item)))


def slice_along_axis(x: Node, axis: Axis, idx: int) -> Node:
    """x at position idx of `axis`, which is removed."""
    pos = x.axes.index(axis)
    return tensor_slice(x, tuple(idx if i == pos else slice(None) for i in range(len(x.axes))))


def slice_axis(axis: Axis, s: slice) -> Axis:
    """The axis a slice leaves (ngraph's `slice_axis`): its name, the slice's length."""
    if not isinstance(s, slice):
        raise OpError(f"slice_axis needs a slice, got {s!r}")
    length = len(range(*s.indices(axis.length)))
    if length < 1:
        raise OpError(f"slice_axis: {s} of {axis!r} is empty (an axis has a positive length)")
    return Axis(axis.name, length)


def pad(x: Node, paddings: Sequence, axes: AxesLike | None = None) -> Node:
    """x with zeros around each axis: per axis an int (both sides) or a (before, after) pair;
    a padded axis keeps its name with the new length unless `axes` names the result."""
    if len(paddings) != len(x.axes):
        raise OpError(f"pad needs one padding per axis of {x.axes!r}, got {len(paddings)}")
    pairs = [(p, p) if isinstance(p, (int, np.integer)) else tuple(p) for p in paddings]
    if axes is None:
        axes = Axes(
            a if pair == (0, 0) else Axis(a.name, a.length + pair[0] + pair[1])
            for a, pair in zip(x.axes, pairs)
        )
    if all(pair == (0, 0) for pair in pairs) and make_axes(axes) == x.axes:
        return x
    spec = np.array(pairs, np.int64).reshape(len(pairs), 2)
    return make_node("Pad", (x,), paddings=spec, axes=make_axes(axes))


def expand_dims(x: Node, axis: Axis, dim: int) -> Node:
    """x repeated along `axis` inserted at position dim (x itself if it has the axis)."""
    if axis in x.axes:
        return x
    return make_node("ExpandDims", (x,), axis=axis, position=dim)


def cast_axes(x: Node, axes: AxesLike) -> Node:
    """x with new axes of the same lengths (x itself for a scalar)."""
    axes = make_axes(axes)
    if axes.lengths != x.axes.lengths:
        raise OpError(f"cast_axes: {axes!r} must have the lengths of {x.axes!r}")
    if axes == x.axes:  # the same names (and, checked above, lengths)
        return x
    return make_node("AxesCast", (x,), axes=axes)


def concat_along_axis(xs: Sequence[Node], axis: Axis) -> Node:
    """Join along the axis named `axis` (in every x, any length); the others are reordered to
    the first's axes; the result's axis keeps the name with the summed length."""
    xs = list(xs)
    if not xs:
        raise OpError("concat_along_axis needs at least one tensor")
    first = xs[0].axes
    pos = first.index(axis)
    parts = []
    for x in xs:
        mine = x.axes[x.axes.index(axis)]
        parts.append(F.axes_with_order(x, first[:pos] + Axes((mine,)) + first[pos + 1 :]))
    total = Axis(axis.name, sum(p.axes[pos].length for p in parts))
    if len(parts) == 1:
        return parts[0]
    return make_node("Concat", tuple(parts), axis=total, position=pos)


OPERATORS["getitem"] = getitem


def gather(x: Node, indices: Node, axis: Axis) -> Node:
    """x indexed along `axis` by integer indices computed at run time (an embedding lookup);
    the indices' axes take the place of `axis`."""
    return make_node("Gather", (x, indices), axis=axis)
