"""ONNX Conv and MaxPool/AveragePool as ngrules' `Convolution` and `Pooling` ops, where those
ops' semantics cover the node: ngraph's named 5-D layouts (input C, D, H, W, N; filter
C, T, R, S, K), symmetric padding, and for pooling no dilation, and an average over the whole
window (ONNX's count_include_pad, or no padding). Missing spatial dimensions are length-1
axes, dropped again from the result. Other nodes go through the primitive form."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.importing.shaping import Tensor, conform, fit, squeeze, temp_axis
from ngrules.ir.axes import Axes
from ngrules.ir.graph import make_node


def fits(spatial: int, pads, extra) -> bool:
    """Symmetric padding, nothing beyond it, at most three spatial dimensions."""
    return 1 <= spatial <= 3 and not any(extra) and pads[:spatial] == pads[spatial:]


def _triple(values, fill: int) -> np.ndarray:
    values = list(values)
    return np.array([fill] * (3 - len(values)) + values, np.int64)


def _fillers(n: int) -> tuple:
    return tuple(temp_axis(1) for _ in range(3 - n))


def _result(node, out, fillers) -> Tensor:
    """The op's 5-D result back in ONNX's rank, as the output's axes."""
    return Tensor(squeeze(node, list(fillers)), out)


def convolution(x: Tensor, w: Tensor, out, strides, dilations, pads, groups: int = 1) -> Tensor:
    spatial = len(x.axes) - 2
    channel = x.axes[1] if x.axes[1].name not in {a.name for a in out} else temp_axis(x.shape[1])
    x = conform(x, (x.axes[0], channel) + x.axes[2:])
    filter_channel = channel if groups == 1 else temp_axis(w.shape[1])
    w = conform(w, (out[1], filter_channel) + tuple(temp_axis(k) for k in w.shape[2:]))
    xs = fit(x.node, Axes((channel, *_fillers(spatial), *x.axes[2:], x.axes[0])))
    ws = fit(w.node, Axes((filter_channel, *_fillers(spatial), *w.axes[2:], out[1])))
    fill = _fillers(spatial)
    node = make_node(
        "Convolution", (xs, ws), padding=_triple(pads[:spatial], 0),
        strides=_triple(strides, 1), dilation=_triple(dilations, 1), groups=groups,
        axes=Axes((out[1], *fill, *out[2:], out[0])),
    )
    return _result(node, out, fill)


def pooling(x: Tensor, out, mode: str, kernel, strides, pads) -> Tensor:
    spatial = len(x.axes) - 2
    xs = fit(x.node, Axes((x.axes[1], *_fillers(spatial), *x.axes[2:], x.axes[0])))
    fill = _fillers(spatial)
    node = make_node(
        "Pooling", (xs,), mode=mode, window=_triple(kernel, 1),
        padding=_triple(pads[:spatial], 0), strides=_triple(strides, 1),
        axes=Axes((x.axes[1], *fill, *out[2:], out[0])),
    )
    return conform(_result(node, (out[0], x.axes[1], *out[2:]), fill), out)


def conv_transpose(x: Tensor, w: Tensor, out_channel, batch, spatial_out, strides, dilations,
                   pads, groups: int) -> Tensor:
    """ONNX ConvTranspose as `ConvBpropData` (the adjoint of a convolution for its input):
    x is the delta (N, C_in, ...), w the filters (C_in, C_out / G, ...). Padding `pads` (one
    per spatial dimension) crops the start of each dimension; `spatial_out` are the result's
    spatial axes, whose lengths the caller checked fit that padding."""
    spatial = len(x.axes) - 2
    filter_channel = out_channel if groups == 1 else temp_axis(w.shape[1])
    k_in = temp_axis(w.shape[0])
    w = conform(w, (k_in, filter_channel) + tuple(temp_axis(k) for k in w.shape[2:]))
    fill = _fillers(spatial)
    xs = fit(x.node, Axes((x.axes[1], *_fillers(spatial), *x.axes[2:], x.axes[0])))
    ws = fit(w.node, Axes((filter_channel, *_fillers(spatial), *w.axes[2:], k_in)))
    node = make_node(
        "ConvBpropData", (xs, ws), padding=_triple(pads, 0), strides=_triple(strides, 1),
        dilation=_triple(dilations, 1), groups=groups,
        axes=Axes((out_channel, *fill, *spatial_out, batch)),
    )
    return _result(node, (batch, out_channel, *spatial_out), fill)
