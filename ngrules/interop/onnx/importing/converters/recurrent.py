"""ONNX LSTM, GRU and RNN as the op table's ops of the same names (`ir/builtin/recurrent.py`):
one node each, which the exporter writes back as the ONNX op. With `unroll_recurrent` the node
is replaced by its unrolled form (`ir/unrolled.py`: primitives per step and direction), which
rules can see inside."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx import ShapeMismatch
from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.shaping import Tensor, conform, temp_axis
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes
from ngrules.ir.builtin.recurrent import ACTIVATIONS
from ngrules.ir.graph import make_node
from ngrules.ir.unrolled import CELLS, unrolled

_GATES = {op: cell[0] for op, cell in CELLS.items()}
_DEFAULTS = {op: cell[1] for op, cell in CELLS.items()}
#: The most steps (times directions) a recurrent node is unrolled into: each is some thirty
#: nodes, and a sequence of 10**9 would never finish importing.
MAX_UNROLLED_STEPS = 1024


def _check_shapes(ctx: Context, x: Tensor, direction: str, layout: int) -> int:
    """The hidden size, after checking every input's shape against it (ONNX's own inference
    reads only some): X (seq, batch, input), W (dirs, gates x hidden, input), R (dirs, gates x
    hidden, hidden), B (dirs, 2 x gates x hidden), initial states (dirs, batch, hidden), P
    (dirs, 3 x hidden); batch first in X and the states with layout=1."""
    hidden = ctx.attr("hidden_size")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ShapeMismatch(f"direction {direction!r} is not forward, reverse or bidirectional")
    if not isinstance(hidden, int) or hidden < 1 or len(x.axes) != 3:
        raise ShapeMismatch(f"hidden_size {hidden} and an input of shape {x.shape} do not make "
                            "a recurrent layer (a positive size, an input of rank 3)")
    dirs, gates = 1 + (direction == "bidirectional"), _GATES[ctx.op] * hidden
    batch = x.shape[1] if not layout else x.shape[0]
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    wanted = {1: (dirs, gates, x.shape[2]), 2: (dirs, gates, hidden), 3: (dirs, 2 * gates),
              5: state, 6: state, 7: (dirs, 3 * hidden)}
    for i, shape in wanted.items():
        if ctx.has(i) and ctx.x(i).shape != shape:
            raise ShapeMismatch(f"input {i} has shape {ctx.x(i).shape}, not {shape}")
    activations = ctx.attr("activations")
    if activations is not None and len(activations) < dirs * len(_DEFAULTS[ctx.op]):
        raise ShapeMismatch(f"{len(activations)} activations for {dirs} direction(s) of "
                            f"{len(_DEFAULTS[ctx.op])}")
    return hidden


@converter("LSTM", "GRU", "RNN")
def _recurrent(ctx: Context):
    x = ctx.x(0)
    layout = int(ctx.attr("layout", 0))
    seq = x.shape[1 if layout else 0]
    if ctx.has(4):
        lengths = ctx.need_const(4, "sequence_lens")
        if (np.ravel(lengths) != seq).any():
            raise ctx.unsupported("sequence_lens shorter than the sequence")
    if ctx.op == "LSTM" and ctx.attr("input_forget", 0):
        raise ctx.unsupported("input_forget=1")
    clip = ctx.attr("clip")
    if clip is not None and not clip > 0:
        raise ctx.unsupported(f"clip={clip} (a threshold is positive)")
    direction = ctx.attr("direction", "forward")
    hidden = _check_shapes(ctx, x, direction, layout)
    node = _as_op(ctx, x, layout, direction, hidden)
    if not ctx.importer.unroll_recurrent:
        outs = F.outputs_of(node)
    elif seq * node.args[2].axes[0].length > MAX_UNROLLED_STEPS:
        raise ShapeMismatch(f"a sequence of {seq} steps in {node.args[2].axes[0].length} "
                            f"direction(s) is more than the {MAX_UNROLLED_STEPS} steps the "
                            "importer unrolls")
    else:
        outs = unrolled(node)
    return [Tensor(out, tuple(out.axes)) if i < len(ctx.node.output) and ctx.node.output[i]
            else None for i, out in enumerate(outs)]


def _as_op(ctx: Context, x: Tensor, layout: int, direction: str, hidden: int):
    """One LSTM/GRU/RNN node over the inputs in ONNX's order (absent ones zeros: sequence_lens,
    checked to be the full length, is left out); R's directions and hidden dimensions get fresh
    axes, which the outputs take."""
    dtype, gates = x.node.dtype, _GATES[ctx.op]
    dirs, hid = temp_axis(1 + (direction == "bidirectional")), temp_axis(hidden)
    batch = x.axes[0 if layout else 1]
    d = dirs.length
    state = (batch.length, d, hidden) if layout else (d, batch.length, hidden)
    shapes = {3: (d, 2 * gates * hidden), 5: state, 6: state, 7: (d, 3 * hidden)}
    r = ctx.x(2)
    args = [x.ordered(), ctx.x(1).ordered(), conform(r, (dirs, r.axes[1], hid)).ordered()]
    for i in (3, 5, 6, 7)[:2 + 2 * (ctx.op == "LSTM")]:
        args.append(ctx.x(i).ordered() if ctx.has(i) else
                    F.broadcast(F.constant(0, dtype=dtype), Axes(temp_axis(k) for k in shapes[i])))
    names = {n.lower(): n for n in ACTIVATIONS}
    given = ctx.attr("activations")
    if given is not None:  # a list of strings comes back as bytes
        given = [a.decode(errors="replace") for a in given[:d * len(_DEFAULTS[ctx.op])]]
        if any(a.lower() not in names for a in given):
            raise ctx.unsupported(f"activations {given}")
    attrs = {"direction": direction, "layout": layout, "clip": float(ctx.attr("clip") or 0.0),
             "activations": ",".join(names[a.lower()] for a in given or ())}
    if ctx.op == "GRU":
        attrs["linear_before_reset"] = int(ctx.attr("linear_before_reset", 0))
    return make_node(ctx.op, tuple(args), **attrs)
