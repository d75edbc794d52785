"""ONNX Gather, GatherElements and GatherND; ScatterElements and ScatterND.

Gather with constant indices picks slices (`shape.pick`), which rules and export read as
plain views; with indices computed at run time (an embedding lookup) it is the `Gather` op.
GatherElements and GatherND are one `Gather` along the data's leading dimensions flattened into
one axis, at a linear index computed from the indices (each normalised from negative first)
and constant position offsets. The scatters are a `ScatterAdd` at such a linear index: of the
updates (reduction add), or of the updates less the values they replace (reduction none, whose
indices ONNX asks to be distinct). ReverseSequence is one `Gather` over time and batch
flattened, at the index the run-time lengths give. A symbolic length in an index (a stride,
the length a negative index counts from) is computed at run time (`_length`), never its
stand-in.
"""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx import UnsupportedOp
from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.shape import cut, pick
from ngrules.interop.onnx.importing.shaping import Tensor, conform, reshape, squeeze, temp_axis
from ngrules.ir import builders as F
from ngrules.ir import symbolic
from ngrules.ir.axes import Axes
from ngrules.ir.graph import Node, make_node

_INDEX = np.dtype(np.int64)


def _free(t: Tensor, taken) -> Tensor:
    """t with temporary names for its axes whose names are in `taken`."""
    names = {a.name for a in taken}
    return conform(t, tuple(temp_axis(a.length) if a.name in names else a for a in t.axes))


@converter("Gather")
def _gather(ctx: Context):
    t, out = ctx.x(0), ctx.out_axes(0)
    pos = ctx.attr("axis", 0) % len(t.axes)
    indices = ctx.const(1)
    if indices is None:
        return [run_time_gather(t, ctx.x(1), pos, out)]
    flat = [int(i) % t.shape[pos] for i in np.ravel(indices)]
    picked = pick(t, pos, flat)
    if indices.ndim == 0:
        gone = picked.axes[pos]
        node = squeeze(picked.node, [gone])
        return [conform(Tensor(node, picked.axes[:pos] + picked.axes[pos + 1 :]), out)]
    return [ctx.result(reshape(picked, out))]


def run_time_gather(t: Tensor, indices: Tensor, pos: int, out) -> Tensor:
    """The Gather op, x's other axes and the indices' axes named as the output's."""
    k = len(indices.axes)
    indices = conform(indices, out[pos : pos + k])
    t = _free(t, out)
    t = conform(t, out[:pos] + (t.axes[pos],) + out[pos + k :])
    node = make_node("Gather", (t.node, indices.node), axis=t.axes[pos])
    return Tensor(node, tuple(out))


def _normalised(index: Node, length: int | Node) -> Node:
    """index + length where it is negative (int64)."""
    index = F.cast(index, _INDEX)
    length = _scalar(length) if isinstance(length, int) else length
    return F.where(F.less(index, F.constant(0, dtype=_INDEX)), index + length, index)


def _length(data: Tensor, positions) -> Node:
    """The product of data's lengths at these positions, an int64 scalar: a constant, or, for
    a symbolic one, the sum of ones along its axis (computed at run time)."""
    static, node = 1, None
    for p in positions:
        axis = data.axes[p]
        if not symbolic.symbols_of(axis.length):
            static *= axis.length
            continue
        ones = F.broadcast(F.constant(1, dtype=_INDEX), Axes((axis,)))
        term = F.sum(ones, out_axes=())
        node = term if node is None else node * term
    if node is None:
        return _scalar(static)
    return node if static == 1 else node * _scalar(static)


def _scalar(value: int) -> Node:
    return F.constant(value, dtype=_INDEX)


def flat_gather(data: Tensor, lead: int, linear: Node, linear_axes) -> Tensor:
    """Gather along data's first `lead` dimensions flattened into one axis."""
    size = int(np.prod(data.shape[:lead]))
    flat_axis = temp_axis(size)
    rest = data.axes[lead:]
    flat = Tensor(reshape(data, (flat_axis,) + rest), (flat_axis,) + rest)
    flat = conform(flat, (flat_axis,) + tuple(temp_axis(a.length) for a in rest))
    node = make_node("Gather", (flat.node, F.axes_with_order(linear, Axes(linear_axes))),
                     axis=flat_axis)
    return Tensor(node, tuple(linear_axes) + flat.axes[1:])


def _strides(shape) -> list[int]:
    return [int(np.prod(shape[i + 1 :])) for i in range(len(shape))]


@converter("GatherElements")
def _gather_elements(ctx: Context):
    """out[j] = data[j with position `axis` replaced by indices[j]], at the linear index
    indices[j] * stride(axis) + the other positions' (constant) offsets."""
    data, out = ctx.x(0), ctx.out_axes(0)
    linear = _element_index(ctx, data, conform(ctx.x(1), out))
    return [flat_gather(data, len(data.axes), linear, out)]


def _element_index(ctx: Context, data: Tensor, indices: Tensor) -> Node:
    """The linear index into data (flattened) of each element of the indices along `axis`."""
    pos = ctx.attr("axis", 0) % len(data.axes)
    n = len(data.axes)
    linear = _normalised(indices.node, _length(data, [pos])) * _length(data, range(pos + 1, n))
    for p, axis in enumerate(indices.axes):  # each other position's offset, one axis each
        if p == pos or axis.length == 1:
            continue
        if symbolic.symbols_of(axis.length):
            where = F.axis_index(indices.node, axis)
        else:
            where = F.constant(np.arange(axis.length), Axes((axis,)), dtype=_INDEX)
        linear = linear + where * _length(data, range(p + 1, n))
    return F.axes_with_order(F.broadcast(linear, Axes(indices.axes)), Axes(indices.axes))


@converter("GatherND")
def _gather_nd(ctx: Context):
    """Index tuples of length k into the data's dimensions b..b+k (after b batch dimensions):
    a linear index over the data's first b+k dimensions."""
    data, indices, out = ctx.x(0), ctx.x(1), ctx.out_axes(0)
    batch = int(ctx.attr("batch_dims", 0))
    if _reads_in_order(data.shape, ctx.const(1), batch):
        return [ctx.result(reshape(data, out))]
    tuple_axes = out[: len(indices.axes) - 1]
    linear = _tuple_index(data, indices, batch, tuple_axes)
    result = flat_gather(data, batch + indices.shape[-1], linear, tuple_axes)
    return [conform(result, out)]


def _reads_in_order(shape, indices: np.ndarray | None, batch: int) -> bool:
    """Whether constant GatherND indices pick every element of the data's first batch + k
    dimensions once, in row-major order (a mask laid out again, as torch's exporter writes
    it): then the result is the data reshaped."""
    if indices is None or indices.ndim < 1 or indices.dtype.kind not in "iu":
        return False
    k = indices.shape[-1]
    lead = shape[batch:batch + k]
    if len(lead) != k or (indices < -np.array(lead)).any() or (indices >= np.array(lead)).any():
        return False
    strides = _strides(shape[:batch + k])
    linear = (np.mod(indices, lead) * strides[batch:]).sum(axis=-1)
    for p in range(batch):
        linear = linear + np.arange(shape[p]).reshape(
            [-1 if q == p else 1 for q in range(linear.ndim)]) * strides[p]
    return linear.size == np.prod(shape[:batch + k]) and (
        np.ravel(linear) == np.arange(linear.size)).all()


def _tuple_index(data: Tensor, indices: Tensor, batch: int, tuple_axes) -> Node:
    """The linear index over data's first batch + k dimensions of each index tuple (the
    indices' last dimension, k long), on `tuple_axes`."""
    k = indices.shape[-1]
    lead = batch + k
    strides = _strides(data.shape[:lead])
    last = len(indices.axes) - 1
    linear = None
    for j in range(k):
        part = cut(indices, last, j, j + 1, temp_axis(1))
        part = conform(Tensor(squeeze(part.node, [part.axes[last]]), part.axes[:last]),
                       tuple_axes)
        p = batch + j
        term = _normalised(part.node, _length(data, [p])) * _length(data, range(p + 1, lead))
        linear = term if linear is None else linear + term
    if batch and symbolic.symbols_of(tuple(data.shape[:batch])):
        raise UnsupportedOp("GatherND: batch dimensions of a symbolic length")
    if batch:
        offsets = np.zeros(tuple(a.length for a in tuple_axes), np.int64)
        for p in range(batch):
            offsets += np.arange(data.shape[p]).reshape(
                [-1 if q == p else 1 for q in range(len(tuple_axes))]) * strides[p]
        linear = linear + F.constant(offsets, Axes(tuple_axes), dtype=_INDEX)
    return linear


def _flat_scatter(ctx: Context, data: Tensor, lead: int, linear: Node, updates: Tensor):
    """data with the updates written (reduction none) or added (add) at the linear index over
    its first `lead` dimensions flattened."""
    reduction = ctx.attr("reduction", "none")
    if reduction not in ("none", "add"):
        raise ctx.unsupported(f"reduction {reduction!r}")
    flat_axis = temp_axis(int(np.prod(data.shape[:lead])))
    rest = tuple(temp_axis(a.length) for a in data.axes[lead:])
    flat = conform(Tensor(reshape(data, (flat_axis,) + data.axes[lead:]),
                          (flat_axis,) + data.axes[lead:]), (flat_axis,) + rest)
    index_axes = tuple(linear.axes)
    values = conform(updates, index_axes + rest).node
    if reduction == "none":
        values = values - make_node("Gather", (flat.node, linear), axis=flat_axis)
    added = make_node("ScatterAdd", (F.axes_with_order(values, Axes(index_axes + rest)), linear),
                      axis=flat_axis, axes=Axes((flat_axis,) + rest))
    total = Tensor(flat.node + F.axes_with_order(added, flat.node.axes), flat.axes)
    return [ctx.result(reshape(total, ctx.out_axes(0)))]


@converter("ScatterElements", "Scatter")
def _scatter_elements(ctx: Context):
    data, indices = ctx.x(0), ctx.x(1)
    positional = tuple(temp_axis(n) for n in indices.shape)
    linear = _element_index(ctx, data, conform(indices, positional))
    return _flat_scatter(ctx, data, len(data.axes), linear, ctx.x(2))


@converter("ScatterND")
def _scatter_nd(ctx: Context):
    data, indices = ctx.x(0), ctx.x(1)
    tuple_axes = tuple(temp_axis(n) for n in indices.shape[:-1])
    linear = _tuple_index(data, indices, 0, tuple_axes)
    return _flat_scatter(ctx, data, indices.shape[-1], linear, ctx.x(2))


@converter("ReverseSequence")
def _reverse_sequence(ctx: Context):
    """out[t, b] = x[len[b] - 1 - t, b] for t < len[b], else x[t, b]: one Gather over time and
    batch flattened, at a linear index computed from the run-time lengths."""
    x = ctx.x(0)
    t_pos, b_pos = ctx.attr("time_axis", 0), ctx.attr("batch_axis", 1)
    rest = [p for p in range(len(x.axes)) if p not in (t_pos, b_pos)]
    order = [t_pos, b_pos, *rest]
    data = Tensor(x.node, tuple(x.axes[p] for p in order))
    time, batch = data.axes[0], data.axes[1]
    lengths = F.cast(conform(ctx.x(1), (batch,)).node, _INDEX)
    steps = F.constant(np.arange(time.length), [time], dtype=_INDEX)
    source = F.where(F.less(steps, lengths), lengths - _scalar(1) - steps, steps)
    linear = source * _scalar(batch.length) + F.constant(np.arange(batch.length), [batch],
                                                         dtype=_INDEX)
    picked = flat_gather(data, 2, linear, (time, batch))
    back = [None] * len(order)
    for i, p in enumerate(order):
        back[p] = picked.axes[i]
    return [conform(Tensor(picked.node, tuple(back)), ctx.out_axes(0))]
