"""ONNX ops that rearrange or combine along dimensions: Tile (a broadcast then a merge),
DepthToSpace and SpaceToDepth (reshape, permute, reshape), CumSum (a `Dot` with a triangular
constant), CumProd (a `Prod` over the same triangle) and Einsum (`Dot` where the operands
share exactly the contracted letters, else a product of broadcasts summed)."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.shaping import Tensor, conform, fit, reshape, temp_axis
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes


@converter("Tile")
def _tile(ctx: Context):
    """Each dimension of length n repeated r times is (r, n) merged: a broadcast then reshape."""
    x = ctx.x(0)
    repeats = [int(r) for r in np.ravel(ctx.need_const(1, "repeats"))]
    axes = []
    for a, r in zip(x.axes, repeats):
        axes += [temp_axis(r), a] if r > 1 else [a]
    spread = Tensor(F.broadcast(x.node, Axes(x.node.axes) | Axes(axes)), tuple(axes))
    return [ctx.result(reshape(spread, ctx.out_axes(0)))]


def _rearranged(ctx: Context, x: Tensor, shape, perm) -> list:
    """x reshaped to `shape`, its positions permuted, reshaped to the output."""
    axes = tuple(temp_axis(n) for n in shape)
    split = Tensor(reshape(x, axes), axes)
    moved = Tensor(split.node, tuple(axes[p] for p in perm))
    return [ctx.result(reshape(moved, ctx.out_axes(0)))]


@converter("DepthToSpace")
def _depth_to_space(ctx: Context):
    x = ctx.x(0)
    n, c, h, w = x.shape
    b = int(ctx.attr("blocksize"))
    if ctx.attr("mode", "DCR") == "DCR":
        return _rearranged(ctx, x, (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2))
    return _rearranged(ctx, x, (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3))


@converter("SpaceToDepth")
def _space_to_depth(ctx: Context):
    x = ctx.x(0)
    n, c, h, w = x.shape
    b = int(ctx.attr("blocksize"))
    perm = (0, 3, 5, 1, 2, 4) if ctx.attr("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    return _rearranged(ctx, x, (n, c, h // b, b, w // b, b), perm)


def _running(ctx: Context):
    """x, its position, the result's axis j and the constant 0/1 matrix over (i, j) of the
    x[i] that y[j] takes: i <= j (i < j exclusive; i >= j, i > j reversed)."""
    x = ctx.x(0)
    pos = int(ctx.need_const(1, "axis").item()) % len(x.axes)
    n = x.shape[pos]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    if ctx.attr("reverse", 0):
        i, j = j, i
    taken = (i < j) if ctx.attr("exclusive", 0) else (i <= j)
    return x, pos, temp_axis(n), taken


@converter("CumSum")
def _cumsum(ctx: Context):
    """y[j] = the sum of the x[i] it takes: x contracted with the 0/1 matrix."""
    x, pos, target, taken = _running(ctx)
    weights = F.constant(taken.astype(x.node.dtype), [x.axes[pos], target], dtype=x.node.dtype)
    summed = F.dot(x.node, weights)
    return [conform(Tensor(summed, x.axes[:pos] + (target,) + x.axes[pos + 1 :]),
                    ctx.out_axes(0))]


@converter("CumProd")
def _cumprod(ctx: Context):
    """y[j] = the product of the x[i] it takes: x spread over (i, j), 1 where not taken,
    multiplied over i (a Prod, so the gradient is the product rule's)."""
    x, pos, target, taken = _running(ctx)
    pair = Axes((x.axes[pos], target))
    spread = F.broadcast(x.node, x.node.axes | pair)
    mask = F.broadcast(F.constant(taken, pair, dtype=np.bool_), spread.axes)
    one = F.broadcast(F.constant(1, dtype=x.node.dtype), spread.axes)
    product = F.prod(F.where(mask, spread, one), reduction_axes=[x.axes[pos]])
    return [conform(Tensor(product, x.axes[:pos] + (target,) + x.axes[pos + 1 :]),
                    ctx.out_axes(0))]


def _parse_einsum(ctx: Context, count: int):
    """(input letter strings, output letters), implicit output as numpy's."""
    equation = ctx.attr("equation").replace(" ", "")
    if "..." in equation:
        raise ctx.unsupported("Einsum with an ellipsis")
    lhs, _, rhs = equation.partition("->")
    inputs = lhs.split(",")
    if not _:  # implicit output: the letters seen once, in order
        rhs = "".join(sorted(c for c in set(lhs) if lhs.count(c) == 1 and c != ","))
    if len(inputs) != count or any(len(set(s)) != len(s) for s in inputs):
        raise ctx.unsupported(f"Einsum equation {equation!r} (a repeated letter in an operand)")
    return inputs, rhs


@converter("Einsum")
def _einsum(ctx: Context):
    operands = [ctx.x(i) for i in range(ctx.arity)]
    inputs, rhs = _parse_einsum(ctx, len(operands))
    out = ctx.out_axes(0)
    letter = dict(zip(rhs, out))
    for letters, t in zip(inputs, operands):
        for c, a in zip(letters, t.axes):
            letter.setdefault(c, temp_axis(a.length))
    nodes = []
    for k, (letters, t) in enumerate(zip(inputs, operands)):
        node = conform(t, tuple(letter[c] for c in letters)).node
        others = inputs[:k] + inputs[k + 1 :]
        only_here = [letter[c] for c in letters if c not in rhs and all(c not in s for s in others)]
        nodes.append(F.sum(node, reduction_axes=only_here) if only_here else node)
    contracted = {c for s in inputs for c in s if c not in rhs} & {
        c for s in inputs for c in s if sum(c in t for t in inputs) > 1}
    if len(nodes) == 2 and set(nodes[0].axes.names) & set(nodes[1].axes.names) == {
            letter[c].name for c in contracted}:
        return [Tensor(fit(F.dot(*nodes), Axes(out)), out)]
    total = nodes[0]
    for node in nodes[1:]:
        union = total.axes | node.axes
        total = fit(total, union) * fit(node, union)
    if contracted:
        total = F.sum(total, reduction_axes=[letter[c] for c in contracted])
    return [Tensor(fit(total, Axes(out)), out)]
