"""ONNX reductions and network layers (softmax, normalisations, pooling) over named axes.

Normalisations are written from primitives the way ngrules' front end writes them (training-
mode batchnorm exactly as `ngrules.ir.layers.batchnorm`, channel first), so the fusion rules of
the library recognise them.
"""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.padmodes import gather_positions
from ngrules.interop.onnx.importing.shaping import Tensor, broadcast_to, fit, squeeze, temp_axis
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes
from ngrules.ir.graph import make_node
from ngrules.ir.layers import batchnorm


def _reduced_positions(ctx: Context, rank: int) -> list[int]:
    axes = ctx.attr("axes")
    if axes is None and ctx.has(1):
        axes = [int(v) for v in np.ravel(ctx.need_const(1, "reduction axes"))]
    if not axes:
        return [] if ctx.attr("noop_with_empty_axes", 0) else list(range(rank))
    return sorted(int(a) % rank for a in axes)


def keep_dims(out, x: Tensor, node, positions) -> Tensor:
    """A reduction's result with ONNX's keepdims: length-1 axes where dimensions were."""
    kept = tuple(a for i, a in enumerate(x.axes) if i not in positions)
    if len(out) == len(kept):
        return Tensor(node, kept)
    names = {a.name for a in kept}
    ones = {i: out[i] if out[i].name not in names else temp_axis(1) for i in positions}
    positional = tuple(ones.get(i, a) for i, a in enumerate(x.axes))
    return Tensor(fit(node, Axes(kept) + Axes(ones.values())), positional)


_REDUCERS = {
    "ReduceSum": lambda x, red: F.sum(x, reduction_axes=red),
    "ReduceMean": lambda x, red: F.mean(x, reduction_axes=red),
    "ReduceMax": lambda x, red: F.max(x, reduction_axes=red),
    "ReduceMin": lambda x, red: F.min(x, reduction_axes=red),
    "ReduceProd": lambda x, red: F.prod(x, reduction_axes=red),
    "ReduceSumSquare": lambda x, red: F.sum(F.square(x), reduction_axes=red),
    "ReduceL1": lambda x, red: F.sum(F.absolute(x), reduction_axes=red),
    "ReduceL2": lambda x, red: F.sqrt(F.sum(F.square(x), reduction_axes=red)),
    "ReduceLogSum": lambda x, red: F.log(F.sum(x, reduction_axes=red)),
    "ReduceLogSumExp": lambda x, red: F.log(F.sum(F.exp(x), reduction_axes=red)),
}


@converter(*_REDUCERS)
def _reduce(ctx: Context):
    x = ctx.x(0)
    positions = _reduced_positions(ctx, len(x.axes))
    red = [x.axes[i] for i in positions]
    node = _REDUCERS[ctx.op](x.node, red) if red else x.node
    if not ctx.attr("keepdims", 1):
        return [Tensor(node, tuple(a for i, a in enumerate(x.axes) if i not in positions))]
    return [keep_dims(ctx.out_axes(0), x, node, positions)]


def _softmax_axes(ctx: Context, x: Tensor) -> list:
    """The axes normalised over: before opset 13, every axis from `axis` on, less those of
    length 1 (a classifier's [N, C, 1, 1] is Softmax over C alone, which exports as one ONNX
    Softmax where the whole tail came back as five nodes)."""
    axis = ctx.attr("axis", -1 if ctx.importer.opset >= 13 else 1) % len(x.axes)
    if ctx.importer.opset >= 13:
        return [x.axes[axis]]
    return [a for a in x.axes[axis:] if a.length != 1] or [x.axes[axis]]


def log_softmax_form(x, red):
    """(x - max) - log(sum(exp(x - max))) over `red`, written from primitives (Softmax itself
    is one op)."""
    shifted = x - F.broadcast(F.max(x, reduction_axes=red), x.axes)
    return shifted - F.log(F.broadcast(F.sum(F.exp(shifted), reduction_axes=red), x.axes))


@converter("Softmax", "LogSoftmax")
def _softmax(ctx: Context):
    x = ctx.x(0)
    red = _softmax_axes(ctx, x)
    if ctx.op == "Softmax":
        return [Tensor(make_node("Softmax", (x.node,), normalization_axes=red), x.axes)]
    return [Tensor(log_softmax_form(x.node, red), x.axes)]


@converter("ArgMax", "ArgMin")
def _argmax(ctx: Context):
    x = ctx.x(0)
    pos = ctx.attr("axis", 0) % len(x.axes)
    op = "Argmax" if ctx.op == "ArgMax" else "Argmin"
    if ctx.attr("select_last_index", 0):  # the first of x reversed along the axis
        length = x.axes[pos].length
        reversed_x = gather_positions(x, pos, np.arange(length)[::-1])
        first = make_node(op, (reversed_x.node,), reduction_axes=[reversed_x.axes[pos]],
                          dtype=ctx.out_dtype())
        node = F.constant(length - 1, dtype=first.dtype) - first
    else:
        node = make_node(op, (x.node,), reduction_axes=[x.axes[pos]], dtype=ctx.out_dtype())
    kept = tuple(a for i, a in enumerate(x.axes) if i != pos)
    if not ctx.attr("keepdims", 1):
        return [Tensor(node, kept)]
    return [keep_dims(ctx.out_axes(0), x, node, [pos])]


@converter("BatchNormalization")
def _batchnorm(ctx: Context):
    x = ctx.x(0)
    channel = x.axes[1] if len(x.axes) > 1 else x.axes[0]
    per_channel = [broadcast_to(ctx.x(i), (channel,)) for i in range(1, 5)]
    scale, bias, mean, var = per_channel
    eps = float(ctx.attr("epsilon", 1e-5))
    if ctx.attr("training_mode", 0):
        return _batchnorm_training(ctx, x, channel, scale, bias, mean, var, eps)
    if len(ctx.node.output) > 1 and any(ctx.node.output[1:]):
        raise ctx.unsupported("BatchNormalization's statistics outputs outside training mode")
    xn, dropped = _unsqueezed(x.node)
    y = (xn - mean) * F.reciprocal(F.sqrt(var + eps)) * scale + bias
    return [Tensor(squeeze(fit(y, xn.axes), dropped), x.axes)]


def _unsqueezed(node):
    """(node, ()) or, for a TensorSlice that only drops length-1 axes (a Convolution's unused
    spatial axes), its argument and those axes: normalising before the drop keeps the
    batchnorm next to the convolution, where the folding rule looks for it."""
    if node.op != "TensorSlice":
        return node, ()
    inner = node.args[0]
    rows = np.asarray(node.attrs["slices"]).tolist()
    if any(r not in ([0, 1, 0], [0, a.length, 1]) or (r[2] == 0 and a.length != 1)
           for r, a in zip(rows, inner.axes)):
        return node, ()
    return inner, tuple(a for r, a in zip(rows, inner.axes) if r[2] == 0)


def _batchnorm_training(ctx, x: Tensor, channel, scale, bias, mean, var, eps):
    """Batch statistics, channel first, as the front end writes batchnorm; running stats
    updated with the momentum (ONNX's `running = momentum * old + (1 - momentum) * batch`)."""
    xc = F.axes_with_order(x.node, Axes((channel,)) + (x.node.axes - Axes((channel,))))
    y = batchnorm(xc, scale, bias, eps)
    outs = [Tensor(y, x.axes)]
    if len(ctx.node.output) > 1:
        momentum = float(ctx.attr("momentum", 0.9))
        batch_mean = F.mean(xc, out_axes=[channel])
        batch_var = F.variance(xc, out_axes=[channel])
        for old, new in ((mean, batch_mean), (var, batch_var)):
            outs.append(Tensor(old * momentum + new * (1.0 - momentum), (channel,)))
    return outs


@converter("LayerNormalization")
def _layernorm(ctx: Context):
    x = ctx.x(0)
    axis = ctx.attr("axis", -1) % len(x.axes)
    red = list(x.axes[axis:])
    eps = float(ctx.attr("epsilon", 1e-5))
    xn = x.node
    kept = xn.axes - Axes(red)
    mean = F.mean(xn, out_axes=kept)
    var = F.variance(xn, out_axes=kept)
    inv = F.reciprocal(F.sqrt(var + eps))
    y = (xn - mean) * inv
    y = y * broadcast_to(ctx.x(1), x.axes)
    if ctx.has(2):
        y = y + broadcast_to(ctx.x(2), x.axes)
    outs = [Tensor(fit(y, x.axes), x.axes)]
    for i, stat in ((1, mean), (2, inv)):
        if len(ctx.node.output) > i and ctx.node.output[i]:
            outs.append(keep_dims(ctx.out_axes(i), x, stat, list(range(axis, len(x.axes)))))
    return outs


@converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx: Context):
    x = ctx.x(0)
    positions = list(range(2, len(x.axes)))
    red = [x.axes[i] for i in positions]
    reduce = F.mean if ctx.op == "GlobalAveragePool" else F.max
    return [keep_dims(ctx.out_axes(0), x, reduce(x.node, reduction_axes=red), positions)]


@converter("TopK")
def _top_k(ctx: Context):
    """Indices by the TopKIndices op; values picked from x by their OneHot (so they are
    differentiable in x)."""
    x = ctx.x(0)
    k = int(np.ravel(ctx.need_const(1, "K"))[0])
    pos = ctx.attr("axis", -1) % len(x.axes)
    out = ctx.out_axes(0)
    top = out[pos] if out[pos].name not in {a.name for a in x.axes} else temp_axis(k)
    indices = make_node("TopKIndices", (x.node,), axis=x.axes[pos], top=top,
                        largest=int(ctx.attr("largest", 1)))
    hot = make_node("OneHot", (indices,), axis=x.axes[pos], dtype=x.node.dtype)
    values = F.sum(hot * fit(x.node, hot.axes), reduction_axes=[x.axes[pos]])
    positional = x.axes[:pos] + (top,) + x.axes[pos + 1 :]
    return [Tensor(values, positional), Tensor(indices, positional)]
