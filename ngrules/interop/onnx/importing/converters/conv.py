"""ONNX Conv, MaxPool, AveragePool and LpPool from primitives (padding by Concat, windows by
Slice), and MaxUnpool (a ScatterAdd).

A convolution is the sum over kernel offsets of a `Dot` between the kernel's tap (output
channels by input channels) and the input window at that offset, which contracts the input
channel; a pooling is the maximum (or mean) of the windows. Strides pick every stride-th
element. Grouped convolutions are always the `Convolution` op (its `groups`).
"""

from __future__ import annotations

import itertools

import numpy as np

from ngrules.interop.onnx import OnnxError, ShapeMismatch
from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.padmodes import kept_range, padded_by_mode
from ngrules.interop.onnx.importing.converters.shape import cut, join, strided
from ngrules.interop.onnx.importing.converters.window import convolution, fits, pooling
from ngrules.interop.onnx.importing.shaping import Tensor, conform, fit, reshape, squeeze, temp_axis
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes
from ngrules.ir.graph import Node, make_node
from ngrules.ir.values import scalar_value


def pad(t: Tensor, pos: int, before: int, after: int, value: float) -> Tensor:
    """t with `before` and `after` elements of `value` around position pos."""
    if not before and not after:
        return t
    if value == 0:
        axis = temp_axis(t.shape[pos] + before + after)
        pads = np.zeros((len(t.node.axes), 2), np.int64)
        node_pos = t.node.axes.index(t.axes[pos])
        pads[node_pos] = (before, after)
        axes = t.node.axes[:node_pos] + Axes((axis,)) + t.node.axes[node_pos + 1 :]
        return Tensor(make_node("Pad", (t.node,), paddings=pads, axes=axes),
                      t.axes[:pos] + (axis,) + t.axes[pos + 1 :])
    parts = []
    for length in (before, after):
        axes = t.axes[:pos] + (temp_axis(length),) + t.axes[pos + 1 :] if length else ()
        parts.append(Tensor(F.constant(value, axes, dtype=t.node.dtype), axes) if axes else None)
    middle = [p for p in (parts[0], t, parts[1]) if p is not None]
    return join(middle, pos, temp_axis(t.shape[pos] + before + after))


def window(t: Tensor, pos: int, start: int, count: int, stride: int, axis) -> Tensor:
    """count elements from start, every stride-th, at position pos, as `axis`."""
    stop = start + stride * (count - 1) + 1
    return strided(t, pos, start, stop, stride, axis)


def _check_geometry(ins, kernel, strides, dilations, pads) -> None:
    """One value per spatial dimension (two pads), each within what the input allows."""
    spatial = len(ins)
    if (len(kernel), len(strides), len(dilations), len(pads)) != (spatial,) * 3 + (2 * spatial,):
        raise ShapeMismatch("kernel_shape, strides, dilations or pads do not have "
                            f"one value per spatial dimension of the input {tuple(ins)}")
    bound = 2 * max(ins) + 1
    for what, values, low in (("kernel_shape", kernel, 1), ("strides", strides, 1),
                              ("dilations", dilations, 1), ("pads", pads, 0)):
        if any(not low <= int(v) <= bound for v in values):
            raise ShapeMismatch(f"{what} {list(values)} out of range for an input "
                                f"of spatial shape {tuple(ins)}")


def _geometry(ctx: Context, ins, outs, kernel):
    """Kernel, strides, dilations, the pads ONNX states (or SAME implies) and the pads the
    output's size needs beyond them (ceil_mode's last windows), per spatial dimension."""
    spatial = len(kernel)
    strides = ctx.attr("strides") or [1] * spatial
    dilations = ctx.attr("dilations") or [1] * spatial
    pads = list(ctx.attr("pads") or [0] * (2 * spatial))
    auto = ctx.attr("auto_pad", "NOTSET")
    _check_geometry(ins, kernel, strides, dilations, pads)
    if any(not 1 <= outs[i] <= ins[i] + pads[i] + pads[spatial + i] for i in range(spatial)):
        raise ShapeMismatch(f"an output of spatial shape {tuple(outs)} does not fit an input "
                            f"of {tuple(ins)} with pads {pads}")
    extra = [0] * spatial
    for i in range(spatial):
        span = (outs[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            total = max(span - ins[i], 0)
            small, big = total // 2, total - total // 2
            pads[i], pads[spatial + i] = (small, big) if auto == "SAME_UPPER" else (big, small)
        elif auto == "VALID":
            pads[i] = pads[spatial + i] = 0
        extra[i] = max(span - ins[i] - pads[i] - pads[spatial + i], 0)
    return list(kernel), strides, dilations, pads, extra


def _padded(t: Tensor, pads, value: float, extra=None) -> Tensor:
    spatial = len(t.axes) - 2
    extra = extra or [0] * spatial
    for i in range(spatial):
        t = pad(t, 2 + i, pads[i], pads[spatial + i] + extra[i], value)
    return t


def _windows(t: Tensor, out_axes, kernel, strides, dilations):
    """(offsets, window) for every kernel offset: the input seen at that tap."""
    for offsets in itertools.product(*(range(k) for k in kernel)):
        w = t
        for i, r in enumerate(offsets):
            count = out_axes[2 + i].length
            w = window(w, 2 + i, r * dilations[i], count, strides[i], out_axes[2 + i])
        yield offsets, w


def _has_bias(ctx: Context) -> bool:
    """Whether the Conv adds a bias: a bias known to be all zeros (the dynamo exporter writes
    one for a bias-free layer) is none, so the convolution stays next to a following batchnorm
    and nothing adds zeros at run time."""
    return ctx.has(2) and scalar_value(ctx.x(2).node) != 0.0


@converter("Conv")
def _conv(ctx: Context):
    x, out = ctx.x(0), ctx.out_axes(0)
    groups = int(ctx.attr("group", 1))
    w = ctx.x(1)
    kernel, strides, dilations, pads, extra = _geometry(ctx, x.shape[2:], ctx.out_shape()[2:],
                                                        w.shape[2:])
    spatial = len(x.axes) - 2
    if groups != 1 and not fits(spatial, pads, extra) and 1 <= spatial <= 3:
        x, pads, extra = _padded(x, pads, 0.0, extra), [0] * (2 * spatial), [0] * spatial
    if fits(spatial, pads, extra):
        y = convolution(x, w, out, strides, dilations, pads, groups)
        if not _has_bias(ctx):
            return [y]
        return [Tensor(y.node + F.broadcast(conform(ctx.x(2), (out[1],)).node, y.node.axes), out)]
    if groups != 1:
        raise ctx.unsupported(f"grouped convolution over {spatial} spatial dimensions")
    xp = _padded(x, pads, 0.0, extra)
    channel = x.axes[1] if x.axes[1].name not in {a.name for a in out} else temp_axis(x.shape[1])
    xp = conform(xp, (out[0], channel) + xp.axes[2:])
    total = None
    for offsets, win in _windows(xp, out, kernel, strides, dilations):
        tap = _tap(w, offsets, out[1], channel)
        term = F.dot(tap, win.node)
        total = term if total is None else total + fit(term, total.axes)
    if _has_bias(ctx):
        total = total + F.broadcast(conform(ctx.x(2), (out[1],)).node, total.axes)
    return [Tensor(total, out)]


def _tap(w: Tensor, offsets, out_channel, in_channel):
    """The kernel at one spatial offset, as [output channel, input channel]."""
    if w.node.op == "Constant":
        value = np.asarray(w.node.attrs["value"])
        order = [w.node.axes.index(a) for a in w.axes]
        tap = value.transpose(order)[(slice(None), slice(None), *offsets)]
        return F.constant(np.ascontiguousarray(tap), [out_channel, in_channel], dtype=tap.dtype)
    t = w
    for i, r in enumerate(offsets):
        t = cut(t, 2 + i, r, r + 1, temp_axis(1))
    node = squeeze(t.node, list(t.axes[2:]))
    return conform(Tensor(node, t.axes[:2]), (out_channel, in_channel)).node


@converter("MaxPool", "AveragePool")
def _pool(ctx: Context):
    x, out = ctx.x(0), ctx.out_axes(0)
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise ctx.unsupported("MaxPool's indices output")
    if x.node.dtype.kind not in "fiu":  # ONNX pools numbers only
        raise ctx.unsupported(f"a {x.node.dtype} input")
    kernel, strides, dilations, pads, extra = _geometry(
        ctx, x.shape[2:], ctx.out_shape()[2:], ctx.attr("kernel_shape")
    )
    is_max = ctx.op == "MaxPool"
    whole = is_max or ctx.attr("count_include_pad", 0) or not any(pads)
    small = all(p < k for p, k in zip(pads, kernel + kernel))
    if fits(len(x.axes) - 2, pads, extra) and whole and small and set(dilations) == {1}:
        return [pooling(x, out, "max" if is_max else "avg", kernel, strides, pads)]
    info = np.finfo if x.node.dtype.kind == "f" else np.iinfo
    fill = info(x.node.dtype).min if is_max else 0.0
    xp = _padded(x, pads, fill, extra)
    xp = conform(xp, out[:2] + xp.axes[2:])
    total = _reduce_windows(xp, out, kernel, strides, dilations,
                            F.maximum if is_max else F.add)
    if not is_max:
        total = total / _count(ctx, x, out, kernel, strides, dilations, pads, extra)
    return [Tensor(total, out)]


def _reduce_windows(xp: Tensor, out, kernel, strides, dilations, combine) -> Node:
    """The windows of the padded input combined (maximum or sum) into the output's axes."""
    total = None
    for _, win in _windows(xp, out, kernel, strides, dilations):
        node = fit(win.node, out)
        total = node if total is None else combine(total, node)
    return total


@converter("LpPool")
def _lp_pool(ctx: Context):
    """(sum of |x| ** p over each window) ** (1 / p), zero padded."""
    x, out = ctx.x(0), ctx.out_axes(0)
    if x.node.dtype.kind != "f":
        raise ctx.unsupported(f"a {x.node.dtype} input")
    kernel, strides, dilations, pads, extra = _geometry(
        ctx, x.shape[2:], ctx.out_shape()[2:], ctx.attr("kernel_shape")
    )
    p = float(ctx.attr("p", 2))
    powered = x.node * x.node if p == 2.0 else F.power(F.absolute(x.node), p)
    xp = _padded(Tensor(powered, x.axes), pads, 0.0, extra)
    xp = conform(xp, out[:2] + xp.axes[2:])
    total = _reduce_windows(xp, out, kernel, strides, dilations, F.add)
    return [Tensor(F.sqrt(total) if p == 2.0 else F.power(total, 1.0 / p), out)]


def _count(ctx, x: Tensor, out, kernel, strides, dilations, pads, extra):
    """How many elements each average covers: the stated pads count with count_include_pad,
    the input always, ceil_mode's extra never."""
    spatial = len(kernel)
    include = ctx.attr("count_include_pad", 0)
    if not any(extra) and (include or not any(pads)):
        return float(np.prod(kernel))
    count = np.ones((), dtype=np.float64)
    for i in range(spatial):
        o = np.arange(out[2 + i].length)[:, None] * strides[i]
        r = np.arange(kernel[i])[None, :] * dilations[i]
        low, high = 0, x.shape[2 + i]
        if include:
            low, high = -pads[i], high + pads[spatial + i]
        inside = (o + r - pads[i] >= low) & (o + r - pads[i] < high)
        count = np.multiply.outer(count, inside.sum(axis=1))
    counts = F.constant(count.astype(x.node.dtype), out[2:], dtype=x.node.dtype)
    return F.broadcast(counts, out)


@converter("Pad")
def _pad_op(ctx: Context):
    """Pad: zeros by the Pad op, other values by Concat, negative pads crop; reflect, edge and
    wrap modes gather (`padmodes`)."""
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.unsupported(f"Pad mode {mode!r}")
    t = ctx.x(0)
    rank = len(t.axes)
    pads = ctx.attr("pads") if ctx.attr("pads") is not None else ctx.need_const(1, "pads")
    pads = [int(p) for p in np.ravel(pads)]
    value = ctx.const(2) if ctx.has(2) else ctx.attr("value", 0.0)
    if value is None:
        raise ctx.unsupported("a pad value computed at run time")
    fill = ctx.scalar(value, t.node.dtype, "pad value")
    positions = (list(range(rank)) if not ctx.has(3)
                 else [int(a) % rank for a in np.ravel(ctx.need_const(3, "pad axes"))])
    n = len(positions)
    if len(pads) != 2 * n:
        raise OnnxError(f"{ctx.label}: pads has {len(pads)} values, not two for each of the "
                        f"{n} padded dimensions")
    if mode != "constant":
        return [conform(padded_by_mode(ctx, t, positions, pads, mode), ctx.out_axes(0))]
    for k, pos in enumerate(positions):
        before, after = pads[k], pads[n + k]
        start, stop = kept_range(ctx, pos, t.shape[pos], before, after)
        if start or stop < t.shape[pos]:
            t = cut(t, pos, start, stop, temp_axis(stop - start))
        t = pad(t, pos, max(before, 0), max(after, 0), fill)
    return [conform(t, ctx.out_axes(0))]


@converter("MaxUnpool")
def _max_unpool(ctx: Context):
    """Each value written at its index into zeros of the pooling's input shape flattened (a
    `ScatterAdd`; MaxPool's indices are distinct), then zero-padded at the end of each spatial
    dimension to `output_shape` when one is given."""
    x, out = ctx.x(0), ctx.out_axes(0)
    kernel = ctx.attr("kernel_shape")
    spatial = len(kernel)
    strides = ctx.attr("strides") or [1] * spatial
    pads = ctx.attr("pads") or [0] * (2 * spatial)
    inferred = list(x.shape[:2]) + [
        (x.shape[2 + d] - 1) * strides[d] - pads[d] - pads[spatial + d] + kernel[d]
        for d in range(spatial)]
    if any(n < 1 for n in inferred) or any(n < i for n, i in zip(ctx.out_shape(), inferred)):
        raise ctx.unsupported(f"an output shape {ctx.out_shape()} under the unpooled {inferred}")
    flat = temp_axis(int(np.prod(inferred)))
    index = F.cast(conform(ctx.x(1), x.axes).node, np.int64)
    spread = make_node("ScatterAdd", (F.axes_with_order(x.node, index.axes), index), axis=flat,
                       axes=Axes((flat,)))
    shaped = tuple(temp_axis(n) for n in inferred)
    y = Tensor(reshape(Tensor(spread, (flat,)), shaped), shaped)
    for d in range(spatial):
        y = pad(y, 2 + d, 0, out[2 + d].length - inferred[2 + d], 0.0)
    return [conform(y, out)]
