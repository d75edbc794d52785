"""ONNX ConvTranspose as the `ConvBpropData` op (the adjoint of a convolution for its input,
which is what a transposed convolution computes).

Where the output's start padding p per dimension fits the op's symmetric padding (the output
length L satisfies (L + 2p - span) // stride == input - 1), the op gives the output directly;
otherwise it gives the full result (no padding), which is then cropped and padded with zeros
to ONNX's output."""

from __future__ import annotations

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.conv import pad
from ngrules.interop.onnx.importing.converters.shape import cut
from ngrules.interop.onnx.importing.converters.window import conv_transpose
from ngrules.interop.onnx.importing.shaping import Tensor, conform, temp_axis
from ngrules.ir import builders as F


def _start_pads(ctx: Context, ins, outs, spans, strides, output_padding) -> list[int]:
    """The padding cropped from the start of each spatial dimension."""
    spatial = len(ins)
    auto = ctx.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER") or ctx.attr("output_shape") is not None:
        totals = [s * (n - 1) + op + k - m
                  for n, m, k, s, op in zip(ins, outs, spans, strides, output_padding)]
        if auto == "SAME_UPPER":
            return [t // 2 for t in totals]
        return [t - t // 2 for t in totals]
    if auto == "VALID":
        return [0] * spatial
    return list(ctx.attr("pads") or [0] * (2 * spatial))[:spatial]


@converter("ConvTranspose")
def _conv_transpose(ctx: Context):
    x, w, out = ctx.x(0), ctx.x(1), ctx.out_axes(0)
    spatial = len(x.axes) - 2
    if not 1 <= spatial <= 3:
        raise ctx.unsupported(f"ConvTranspose over {spatial} spatial dimensions")
    groups = int(ctx.attr("group", 1))
    kernel = list(w.shape[2:])
    strides = list(ctx.attr("strides") or [1] * spatial)
    dilations = list(ctx.attr("dilations") or [1] * spatial)
    output_padding = list(ctx.attr("output_padding") or [0] * spatial)
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilations)]
    ins, outs = x.shape[2:], ctx.out_shape()[2:]
    starts = _start_pads(ctx, ins, outs, spans, strides, output_padding)
    fits = all((m + 2 * p - k) // s == n - 1 and m + 2 * p >= k
               for n, m, k, s, p in zip(ins, outs, spans, strides, starts))
    if fits:
        y = conv_transpose(x, w, out[1], out[0], out[2:], strides, dilations, starts, groups)
    else:
        full = tuple(temp_axis(s * (n - 1) + k) for n, k, s in zip(ins, spans, strides))
        y = conv_transpose(x, w, out[1], out[0], full, strides, dilations, [0] * spatial, groups)
        for i, (m, p) in enumerate(zip(outs, starts)):
            length = full[i].length
            stop = min(p + m, length)
            y = cut(y, 2 + i, p, stop, temp_axis(stop - p))
            y = pad(y, 2 + i, 0, p + m - stop, 0.0)
        y = conform(y, out)
    if ctx.has(2):
        bias = F.broadcast(conform(ctx.x(2), (out[1],)).node, y.node.axes)
        y = Tensor(y.node + bias, out)
    return [y]
