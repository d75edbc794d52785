"""ONNX DFT and the window functions, from primitives.

A DFT is linear in its input: the (real, imaginary) output along the frequency axis is a `Dot`
of the (real[, imaginary]) input along the signal axis with a constant matrix, computed at
import by numpy's FFT of each unit input (forward, inverse, one-sided, inverse one-sided; the
signal padded or cut to `dft_length`), in float64. An inverse complex DFT in single or half
precision is refused: ONNX's reference rounds its FFT in that precision, and near 0 the exact
transform is further from it than the conformance tolerance (1e-7). Hann, Hamming and
Blackman windows are constants of the size given."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.shaping import Tensor, conform, temp_axis
from ngrules.ir import builders as F


def _transform(signal: np.ndarray, length: int, inverse: bool, onesided: bool) -> np.ndarray:
    """DFT of one complex signal as (frequencies, components)."""
    if inverse and onesided:
        return np.fft.irfft(signal, n=length)[:, None]
    out = np.fft.ifft(signal, n=length) if inverse else np.fft.fft(signal, n=length)
    if onesided:
        out = out[: length // 2 + 1]
    return np.stack([out.real, out.imag], axis=-1)


def dft_matrix(n: int, parts: int, length: int, inverse: bool, onesided: bool) -> np.ndarray:
    """(n, parts, frequencies, components): the output for each unit input."""
    columns = []
    for i in range(n):
        for part in range(parts):
            unit = np.zeros(n, complex)
            unit[i] = 1j if part else 1.0
            columns.append(_transform(unit, length, inverse, onesided))
    return np.stack(columns).reshape((n, parts) + columns[0].shape)


@converter("DFT")
def _dft(ctx: Context):
    x = ctx.x(0)
    rank = len(x.axes)
    if ctx.has(2):
        axis = int(np.asarray(ctx.need_const(2, "axis")).reshape(()))
    else:
        axis = ctx.attr("axis", 1 if ctx.importer.opset < 20 else -2)
    pos = axis % rank
    if pos == rank - 1:
        raise ctx.unsupported("a DFT along the last (real and imaginary) dimension")
    inverse, onesided = bool(ctx.attr("inverse", 0)), bool(ctx.attr("onesided", 0))
    if inverse and not onesided and x.node.dtype.itemsize < 8:
        raise ctx.unsupported(f"an inverse complex DFT of {x.node.dtype} values (ONNX's "
                              "reference rounds its FFT in that precision, by more than its "
                              "tolerance of 1e-7 near 0 from the exact transform)")
    n = x.shape[pos]
    if ctx.has(1):
        length = int(np.asarray(ctx.need_const(1, "dft_length")).reshape(()))
    else:
        length = 2 * (n - 1) if inverse and onesided else n
    if length < 1:
        raise ctx.unsupported(f"a dft_length of {length}")
    matrix = dft_matrix(n, x.shape[-1], length, inverse, onesided)
    freq, comp = temp_axis(matrix.shape[2]), temp_axis(matrix.shape[3])
    work = np.dtype(np.float64)
    weights = F.constant(matrix, [x.axes[pos], x.axes[-1], freq, comp], dtype=work)
    y = F.cast(F.dot(F.cast(x.node, work), weights), x.node.dtype)
    axes = x.axes[:pos] + (freq,) + x.axes[pos + 1 : -1] + (comp,)
    return [conform(Tensor(y, axes), ctx.out_axes(0))]


def _window(kind: str, size: int, periodic: bool) -> np.ndarray:
    """ONNX's windows: cosine sums over 2 pi k / N, N = size (periodic) or size - 1."""
    n = np.arange(size)
    step = 2 * np.pi * n / (size if periodic else size - 1)
    if kind == "HannWindow":
        return 0.5 - 0.5 * np.cos(step)
    if kind == "HammingWindow":
        return 25 / 46 - 21 / 46 * np.cos(step)
    return 0.42 - 0.5 * np.cos(step) + 0.08 * np.cos(2 * step)


@converter("HannWindow", "HammingWindow", "BlackmanWindow")
def _window_op(ctx: Context):
    size = int(np.asarray(ctx.need_const(0, "window size")).reshape(()))
    periodic = bool(ctx.attr("periodic", 1))
    if size < 2 and not periodic:
        raise ctx.unsupported(f"a symmetric window of size {size}")
    dtype = ctx.out_dtype()
    value = _window(ctx.op, size, periodic).astype(dtype)
    return [Tensor(F.constant(value, ctx.out_axes(0), dtype=dtype), ctx.out_axes(0))]
