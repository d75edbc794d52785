"""ONNX image geometry from primitives, as `Dot`s with constants computed at import:
AffineGrid (theta times the homogeneous coordinates of the output's pixels, in [-1, 1]) and
Col2Im (the columns of sliding blocks summed back into the image: a 0/1 matrix maps each
(kernel offset, block) to the pixel it covers)."""

from __future__ import annotations

import itertools

import numpy as np

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.shaping import Tensor, conform, reshape, temp_axis
from ngrules.ir import builders as F


def _coordinates(n: int, align_corners: bool) -> np.ndarray:
    """Pixel centres of a length-n dimension in [-1, 1] (the corners' centres at -1 and 1
    with align_corners)."""
    if align_corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    return (2.0 * np.arange(n) + 1.0) / n - 1.0


def _ints(ctx: Context, i: int, what: str) -> list[int]:
    return [int(v) for v in np.ravel(ctx.need_const(i, what))]


@converter("AffineGrid")
def _affine_grid(ctx: Context):
    theta = ctx.x(0)  # (N, d, d + 1)
    size = _ints(ctx, 1, "size")
    spatial = size[2:]
    if len(spatial) not in (2, 3) or len(spatial) != theta.shape[1]:
        raise ctx.unsupported(f"an AffineGrid of size {size}")
    axes = [_coordinates(n, bool(ctx.attr("align_corners", 0))) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # per dimension, over (D,) H, W
    homogeneous = np.stack([*mesh[::-1], np.ones(mesh[0].shape)], axis=-1)  # x, y(, z), 1
    pixels = tuple(temp_axis(n) for n in spatial)
    dtype = theta.node.dtype
    base = F.constant(homogeneous.astype(dtype), [*pixels, theta.axes[2]], dtype=dtype)
    grid = F.dot(theta.node, base)  # (N, d, pixels...)
    out = (theta.axes[0], *pixels, theta.axes[1])
    return [conform(Tensor(grid, out), ctx.out_axes(0))]


def col2im_matrix(image, block, dilations, pads, strides) -> np.ndarray:
    """(kernel offsets, blocks, pixels): 1 where that offset of that block reads that pixel."""
    spatial = len(image)
    counts = [(image[d] + pads[d] + pads[spatial + d] - dilations[d] * (block[d] - 1) - 1)
              // strides[d] + 1 for d in range(spatial)]
    matrix = np.zeros((int(np.prod(block)), int(np.prod(counts)), int(np.prod(image))))
    for k, offset in enumerate(itertools.product(*(range(b) for b in block))):
        for j, where in enumerate(itertools.product(*(range(c) for c in counts))):
            pixel = [where[d] * strides[d] - pads[d] + offset[d] * dilations[d]
                     for d in range(spatial)]
            if all(0 <= p < n for p, n in zip(pixel, image)):
                matrix[k, j, np.ravel_multi_index(pixel, image)] = 1.0
    return matrix


@converter("Col2Im")
def _col2im(ctx: Context):
    x = ctx.x(0)  # (N, C * prod(block), L)
    image, block = _ints(ctx, 1, "image_shape"), _ints(ctx, 2, "block_shape")
    spatial = len(image)
    dilations = ctx.attr("dilations") or [1] * spatial
    pads = ctx.attr("pads") or [0] * (2 * spatial)
    strides = ctx.attr("strides") or [1] * spatial
    matrix = col2im_matrix(image, block, dilations, pads, strides)
    if matrix.shape[1] != x.shape[2]:
        raise ctx.unsupported(f"{x.shape[2]} blocks where the geometry makes {matrix.shape[1]}")
    batch, channel, taps = x.axes[0], temp_axis(x.shape[1] // matrix.shape[0]), temp_axis(
        matrix.shape[0])
    split = (batch, channel, taps, x.axes[2])
    columns = Tensor(reshape(x, split), split)
    pixels = temp_axis(matrix.shape[2])
    dtype = x.node.dtype
    weights = F.constant(matrix.astype(dtype), [taps, x.axes[2], pixels], dtype=dtype)
    summed = Tensor(F.dot(columns.node, weights), (batch, channel, pixels))
    out = ctx.out_axes(0)
    return [Tensor(reshape(summed, out), out)]
