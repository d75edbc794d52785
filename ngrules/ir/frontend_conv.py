"""Front-end convolution and pooling in ngraph's signatures: `convolution(conv_params, inputs,
filters, axes)` and `pooling(pool_params, inputs, axes)`, with ngraph's parameter names
(pad_d/h/w, str_d/h/w, dil_d/h/w; T/R/S and op for pooling). Re-exported by
`ngrules.ir.builders`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ngrules.errors import OpError
from ngrules.ir.axes import Axes, AxesLike, Axis, make_axes
from ngrules.ir.graph import Node, make_node

_SPATIAL = ("d", "h", "w")


def _triple(params: Mapping, prefix: str, default: int) -> np.ndarray:
    return np.array([int(params.get(f"{prefix}_{s}", default)) for s in _SPATIAL], np.int64)


def _check_keys(params: Mapping, known: set[str], what: str) -> None:
    unknown = set(params) - known
    if unknown:
        raise OpError(f"{what}: unknown parameters {sorted(unknown)}; known: {sorted(known)}")


_CONV_KEYS = {f"{p}_{s}" for p in ("pad", "str", "dil") for s in _SPATIAL}


def conv_attrs(conv_params: Mapping) -> dict:
    """The op attributes for ngraph's conv_params (missing ones: no padding, stride 1)."""
    _check_keys(conv_params, _CONV_KEYS, "convolution")
    return {
        "padding": _triple(conv_params, "pad", 0),
        "strides": _triple(conv_params, "str", 1),
        "dilation": _triple(conv_params, "dil", 1),
    }


def _default_axes(names, lengths) -> Axes:
    """Result axes named as ngraph's examples; a window too big is left for the op to report."""
    return Axes(Axis(n, max(k, 1)) for n, k in zip(names, lengths))


def _out_spatial(x: Axes, window, attrs) -> list[int]:
    dil = attrs.get("dilation", np.ones(3, np.int64))
    return [
        (n + 2 * int(p) - (int(d) * (k - 1) + 1)) // int(s) + 1
        for n, k, p, s, d in zip(x.lengths[1:4], window, attrs["padding"], attrs["strides"], dil)
    ]


def convolution(
    conv_params: Mapping, inputs: Node, filters: Node, axes: AxesLike | None = None
) -> Node:
    """Cross-correlation of inputs (C, D, H, W, N) with filters (C, T, R, S, K), giving
    (K, M, P, Q, N); `axes` names the result (default K, M, P, Q and the input's batch axis)."""
    attrs = conv_attrs(conv_params)
    if axes is None:
        k, n = filters.axes[-1].length, inputs.axes[-1]
        spatial = _out_spatial(inputs.axes, filters.axes.lengths[1:4], attrs)
        axes = _default_axes("KMPQ", [k, *spatial]) + Axes((n,))
    return make_node("Convolution", (inputs, filters), axes=make_axes(axes), **attrs)


#: ngraph's pool_params: the window T, R, S (and J over channels), padding and strides per axis.
_POOL_KEYS = {
    "op", "T", "R", "S", "J", *(f"{p}_{s}" for p in ("pad", "str") for s in ("c", *_SPATIAL))
}


def pool_attrs(pool_params: Mapping) -> dict:
    """The op attributes for ngraph's pool_params (J, channel pooling, must be 1)."""
    _check_keys(pool_params, _POOL_KEYS, "pooling")
    channel = {k: int(pool_params.get(k, d)) for k, d in (("J", 1), ("pad_c", 0), ("str_c", 1))}
    if channel != {"J": 1, "pad_c": 0, "str_c": 1}:
        raise OpError(f"pooling: pooling across channels is not supported (J=1, pad_c=0, "
                      f"str_c=1 only; got {channel})")
    return {
        "mode": pool_params.get("op", "max"),
        "window": np.array([int(pool_params.get(k, 1)) for k in "TRS"], np.int64),
        "padding": _triple(pool_params, "pad", 0),
        "strides": _triple(pool_params, "str", 1),
    }


def pooling(pool_params: Mapping, inputs: Node, axes: AxesLike | None = None) -> Node:
    """Max or average over windows of inputs (C, D, H, W, N), giving (C, M, P, Q, N)."""
    attrs = pool_attrs(pool_params)
    if len(inputs.axes) != 5:
        raise OpError(f"pooling: the input needs 5 axes (C, D, H, W, N), got {inputs.axes!r}")
    if axes is None:
        spatial = _out_spatial(inputs.axes, attrs["window"].tolist(), attrs)
        x = inputs.axes
        axes = Axes((x[0],)) + _default_axes("MPQ", spatial) + Axes((x[4],))
    return make_node("Pooling", (inputs,), axes=make_axes(axes), **attrs)
