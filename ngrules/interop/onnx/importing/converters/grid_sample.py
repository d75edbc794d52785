"""ONNX GridSample from primitives: each output point's grid coordinates are mapped to pixel
positions of the input (`align_corners`), rounded (nearest) or split into taps with weights
(linear: 2 per dimension; cubic: 4, Keys' kernel with a = -0.75); a position outside the image
is clamped (border) or reflected (reflection) first. Each combination of taps is one run-time
`Gather` of the input flattened over batch and space, weighted; taps outside the image read 0
(zeros), the nearest edge (border) or their reflection."""

from __future__ import annotations

import itertools

import numpy as np

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.gather import flat_gather
from ngrules.interop.onnx.importing.converters.shape import cut
from ngrules.interop.onnx.importing.shaping import Tensor, conform, squeeze, temp_axis
from ngrules.ir import builders as F
from ngrules.ir.graph import Node, make_node

_MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "cubic": "cubic",
          "nearest": "nearest"}
_A = -0.75


def _reflect(v: Node, low: float, high: float) -> Node:
    """v folded back into [low, high] by reflections at its ends."""
    span = high - low

    def fold(distance: Node, near: float, far: float, sign: float) -> Node:
        turns = F.floor(distance / span)
        rest = distance - turns * span
        even = F.equal(F.mod(turns, 2.0), 0.0)
        return F.where(even, rest * sign + near, far - rest * sign)

    below = fold(low - v, low, high, 1.0)
    above = fold(v - high, high, low, -1.0)
    return F.where(F.less(v, low), below, F.where(F.greater(v, high), above, v))


def _cubic_weights(f: Node) -> list[Node]:
    """Keys' cubic convolution weights of the taps at -1, 0, 1, 2 for the fraction f."""
    def near(x):  # |x| <= 1
        return ((x * (_A + 2) - (_A + 3)) * x * x) + 1.0

    def far(x):  # 1 < |x| < 2
        return ((x * _A - 5 * _A) * x + 8 * _A) * x - 4 * _A

    one_minus = 1.0 - f
    return [far(f + 1.0), near(f), near(one_minus), far(2.0 - f)]


def _taps(position: Node, mode: str) -> list[tuple[Node, Node | None]]:
    """(index as a float, weight) of each tap of one dimension."""
    if mode == "nearest":
        return [(position, None)]
    start = F.floor(position)
    f = position - start
    if mode == "linear":
        return [(start, 1.0 - f), (start + 1.0, f)]
    return [(start + float(t), w) for t, w in zip((-1, 0, 1, 2), _cubic_weights(f))]


def _fetch_index(index: Node, n: int, padding: str, low: float, high: float):
    """(int64 index inside [0, n), or None where the tap reads 0) for the padding mode."""
    if padding == "border":
        index = F.minimum(F.maximum(index, 0.0), float(n - 1))
    elif padding == "reflection":
        index = F.maximum(F.floor(_reflect(index, low, high)), 0.0)  # int(): toward zero
    inside = F.logical_and(F.greater_equal(index, 0.0), F.less(index, float(n)))
    safe = F.minimum(F.maximum(index, 0.0), float(n - 1))
    return F.cast(safe, np.int64), inside if padding == "zeros" else None


@converter("GridSample")
def _grid_sample(ctx: Context):
    x, out = ctx.x(0), ctx.out_axes(0)
    mode = _MODES.get(ctx.attr("mode", "linear" if ctx.importer.opset >= 20 else "bilinear"))
    padding = ctx.attr("padding_mode", "zeros")
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise ctx.unsupported(f"mode {ctx.attr('mode')!r} with padding {padding!r}")
    align = bool(ctx.attr("align_corners", 0))
    spatial = x.shape[2:]
    r = len(spatial)
    points = (x.axes[0],) + tuple(out[2:])
    grid = conform(ctx.x(1), points + (temp_axis(r),))
    work = grid.node.dtype
    per_dim = []
    for d, n in enumerate(spatial):
        part = cut(grid, r + 1, r - 1 - d, r - d, temp_axis(1))  # x is the last dimension
        g = squeeze(part.node, [part.axes[-1]])
        position = (g + 1.0) * ((n - 1) / 2.0) if align else ((g + 1.0) * n - 1.0) * 0.5
        if mode == "nearest":
            position = make_node("Round", (position,))  # half to even, as ONNX's rint
        low, high = (0.0, n - 1.0) if align else (-0.5, n - 0.5)
        outside = F.logical_or(F.less(position, low), F.greater(position, high))
        if padding == "border":
            position = F.where(outside, F.minimum(F.maximum(position, 0.0), float(n - 1)),
                               position)
        elif padding == "reflection":
            position = _reflect(position, low, high)
        taps = [(*_fetch_index(i, n, padding, low, high), w) for i, w in _taps(position, mode)]
        per_dim.append(taps)
    data = Tensor(x.node, (x.axes[0], *x.axes[2:], x.axes[1]))  # batch, space, channel
    pixels = int(np.prod(spatial))
    base = F.constant(np.arange(x.shape[0], dtype=np.int64) * pixels, [points[0]],
                      dtype=np.int64)
    strides = [int(np.prod(spatial[d + 1 :])) for d in range(r)]
    total = None
    for combo in itertools.product(*per_dim):
        linear, weight = base, None
        for (index, inside, w), stride in zip(combo, strides):
            linear = linear + index * F.constant(stride, dtype=np.int64)
            if inside is not None:  # zeros padding: a tap outside the image reads 0
                mask = F.cast(inside, work)
                w = mask if w is None else w * mask
            if w is not None:
                weight = w if weight is None else weight * w
        picked = conform(flat_gather(data, 1 + r, F.broadcast(linear, points), points),
                         points + (x.axes[1],))
        term = picked.node if weight is None else picked.node * F.cast(
            F.broadcast(weight, points), x.node.dtype)
        total = term if total is None else total + term
    return [conform(Tensor(total, (points[0], x.axes[1]) + points[1:]), out)]

