"""What convolution and pooling share: ngraph's named 5-D layouts, the output-size rule, and
the strided window views their kernels loop over.

Inputs are (C, D, H, W, N) by position; filters (C, T, R, S, K); results (K or C, M, P, Q, N).
`padding`, `strides` and `dilation` hold one value per spatial axis (d, h, w).
"""

from __future__ import annotations

import itertools

import numpy as np

from ngrules.errors import OpError
from ngrules.ir.axes import Axes
from ngrules.ir.ops import AttrSpec


def triple(name: str, default: int, doc: str) -> AttrSpec:
    return AttrSpec(name, "array", np.array([default] * 3, np.int64), doc)


GEOMETRY = (
    triple("padding", 0, "zeros added on both sides of D, H, W"),
    triple("strides", 1, "steps of the window along D, H, W"),
    triple("dilation", 1, "spacing of the window's taps along D, H, W"),
)


_ONES = np.ones(3, np.int64)


def geometry(attrs) -> tuple[tuple[int, ...], ...]:
    """(padding, strides, dilation) as int triples, checked."""
    out = []
    for key, low in (("padding", 0), ("strides", 1), ("dilation", 1)):
        value = attrs.get(key, _ONES)  # pooling has no dilation
        values = value.tolist()  # Python numbers: no numpy call per comparison or element
        if value.shape != (3,) or any(v < low for v in values):
            raise OpError(f"{key} needs 3 values (d, h, w), each >= {low}; got {values}")
        out.append(tuple([int(v) for v in values]))
    return tuple(out)


def out_lengths(op: str, spatial, window, attrs) -> tuple[int, ...]:
    """M, P, Q: (length + 2 pad - (dil (window - 1) + 1)) // stride + 1, each at least 1."""
    pad, stride, dil = geometry(attrs)
    lengths = tuple(
        (n + 2 * p - (d * (k - 1) + 1)) // s + 1
        for n, k, p, s, d in zip(spatial, window, pad, stride, dil)
    )
    if min(lengths) < 1:
        raise OpError(f"{op}: the window {tuple(window)} does not fit the input {tuple(spatial)}")
    return lengths


def check_rank5(op: str, what: str, axes: Axes) -> None:
    if len(axes) != 5:
        raise OpError(f"{op}: {what} needs 5 axes, got {axes!r}")


def check_result(op: str, axes: Axes, lengths) -> Axes:
    if axes.lengths != tuple(lengths):
        raise OpError(f"{op}: result axes {axes!r} must have lengths {tuple(lengths)}")
    return axes


def taps(window, attrs, out_spatial):
    """For each window position (t, r, s): the index of the strided input slice it reads in
    the padded input, over axes (C, D, H, W, N)."""
    _, stride, dil = geometry(attrs)
    for tap in itertools.product(*(range(k) for k in window)):
        yield tap, (slice(None),) + tuple(
            slice(i * d, i * d + s * (m - 1) + 1, s)
            for i, d, s, m in zip(tap, dil, stride, out_spatial)
        ) + (slice(None),)


def padded(a: np.ndarray, attrs, fill=0.0) -> np.ndarray:
    pad = geometry(attrs)[0]
    if not any(pad):
        return a
    return np.pad(a, [(0, 0)] + [(p, p) for p in pad] + [(0, 0)], constant_values=fill)


def cropped(a: np.ndarray, attrs) -> np.ndarray:
    pad = geometry(attrs)[0]
    return a[(slice(None),) + tuple(slice(p, a.shape[i + 1] - p) for i, p in enumerate(pad))]
