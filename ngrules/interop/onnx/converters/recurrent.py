"""ONNX LSTM, GRU and RNN unrolled over their static sequence into primitives: per step and
direction, `Dot`s of the gates' weights with the input and the previous hidden state, biases,
activations (Sigmoid, Tanh, Relu) and the cell's elementwise update. The hidden state lives on
its own axis (S) so that the recurrent weights contract it while the gates (axis G) come out
beside it; each step's output is renamed from G to S for the next."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ngrules.interop.onnx import ShapeMismatch
from ngrules.interop.onnx.context import Context, converter
from ngrules.interop.onnx.converters.shape import cut, join
from ngrules.interop.onnx.shaping import Tensor, conform, squeeze, temp_axis
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes
from ngrules.ir.graph import Node

_ACTIVATIONS: dict[str, Callable[[Node], Node]] = {
    "sigmoid": F.sigmoid,
    "tanh": F.tanh,
    "relu": lambda x: F.maximum(x, 0.0),
}
_DEFAULTS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"), "RNN": ("Tanh",)}
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
#: The most steps (times directions) a recurrent node is unrolled into: each is some thirty
#: nodes, and a sequence of 10**9 would never finish importing.
MAX_UNROLLED_STEPS = 1024


def _picked(t: Tensor, pos: int, index: int) -> Tensor:
    """t at one index of position pos, that dimension dropped."""
    part = cut(t, pos, index, index + 1, temp_axis(1))
    return Tensor(squeeze(part.node, [part.axes[pos]]), part.axes[:pos] + part.axes[pos + 1 :])


class _Cell:
    """One direction of a recurrent node: its weights as (G, I) and (G, S) nodes per gate,
    biases as (G,) nodes, activations."""

    def __init__(self, ctx: Context, d: int, axes):
        self.ctx, self.d = ctx, d
        self.gate, self.state, self.inputs, self.batch = axes
        self.h = self.gate.length
        self.count = _GATES[ctx.op]
        self.w = _picked(ctx.x(1), 0, d)
        self.r = _picked(ctx.x(2), 0, d)
        self.b = _picked(ctx.x(3), 0, d) if ctx.has(3) else None
        names = ctx.attr("activations") or list(_DEFAULTS[ctx.op]) * 2
        per = len(_DEFAULTS[ctx.op])
        chosen = names[d * per : (d + 1) * per]
        if any(n.lower() not in _ACTIVATIONS for n in chosen):
            raise ctx.unsupported(f"activations {chosen}")
        self.f = [_ACTIVATIONS[n.lower()] for n in chosen]
        self.clip = ctx.attr("clip")

    def _rows(self, t: Tensor, k: int, axes) -> Node:
        part = cut(t, 0, k * self.h, (k + 1) * self.h, temp_axis(self.h))
        return conform(part, axes).node

    def input_term(self, k: int, x_t: Node) -> Node:
        """W_k x_t (+ both biases of gate k): axes (G, batch)."""
        term = F.dot(self._rows(self.w, k, (self.gate, self.inputs)), x_t)
        if self.b is not None:
            bias = self._rows(self.b, k, (self.gate,)) + self._rows(self.b, self.count + k,
                                                                    (self.gate,))
            term = term + F.broadcast(bias, term.axes)
        return term

    def state_term(self, k: int, h_prev: Node, with_bias: bool = False) -> Node:
        term = F.dot(self._rows(self.r, k, (self.gate, self.state)), h_prev)
        if with_bias and self.b is not None:
            bias = self._rows(self.b, self.count + k, (self.gate,))
            term = term + F.broadcast(bias, term.axes)
        return term

    def clipped(self, x: Node) -> Node:
        if self.clip is None:
            return x
        return F.minimum(F.maximum(x, -float(self.clip)), float(self.clip))

    def to_state(self, node: Node) -> Node:
        return F.cast_axes(F.axes_with_order(node, Axes((self.gate, self.batch))),
                         Axes((self.state, self.batch)))


def _lstm_step(cell: _Cell, x_t, h, c):
    f, g, act_h = cell.f
    pre = [cell.input_term(k, x_t) + cell.state_term(k, h) for k in range(4)]
    peep = _picked(cell.ctx.x(7), 0, cell.d) if cell.ctx.has(7) else None

    def peephole(k, cell_state):
        if peep is None:
            return 0.0
        weights = cut(peep, 0, k * cell.h, (k + 1) * cell.h, temp_axis(cell.h))
        return F.broadcast(conform(weights, (cell.gate,)).node, pre[0].axes) * cell_state

    i = f(cell.clipped(pre[0] + peephole(0, c)))
    forget = f(cell.clipped(pre[2] + peephole(2, c)))
    candidate = g(cell.clipped(pre[3]))
    c_new = forget * c + i * candidate
    o = f(cell.clipped(pre[1] + peephole(1, c_new)))
    return o * act_h(c_new), c_new


def _gru_step(cell: _Cell, x_t, h, c):
    f, g = cell.f
    h_gates = F.axes_with_order(F.cast_axes(h, Axes((cell.gate, cell.batch))),
                                Axes((cell.gate, cell.batch)))
    z = f(cell.clipped(cell.input_term(0, x_t) + cell.state_term(0, h)))
    r = f(cell.clipped(cell.input_term(1, x_t) + cell.state_term(1, h)))
    x_h = cell.input_term(2, x_t)
    if cell.ctx.attr("linear_before_reset", 0):
        wb = (_without_state_bias(cell, x_t))
        candidate = g(cell.clipped(wb + r * cell.state_term(2, h, with_bias=True)))
    else:
        reset = cell.to_state(r * h_gates)
        candidate = g(cell.clipped(x_h + cell.state_term(2, reset)))
    return (1.0 - z) * candidate + z * h_gates, None


def _without_state_bias(cell: _Cell, x_t) -> Node:
    """W_h x_t + Wb_h only (linear_before_reset puts Rb_h inside the reset)."""
    term = F.dot(cell._rows(cell.w, 2, (cell.gate, cell.inputs)), x_t)
    if cell.b is not None:
        term = term + F.broadcast(cell._rows(cell.b, 2, (cell.gate,)), term.axes)
    return term


def _rnn_step(cell: _Cell, x_t, h, c):
    return cell.f[0](cell.clipped(cell.input_term(0, x_t) + cell.state_term(0, h))), None


_STEPS = {"LSTM": _lstm_step, "GRU": _gru_step, "RNN": _rnn_step}


def _initial(ctx: Context, i: int, d: int, layout: int, axes, dtype) -> Node:
    """initial_h / initial_c of direction d as (axes), zeros when absent."""
    if not ctx.has(i):
        return F.broadcast(F.constant(0, dtype=dtype), Axes(axes))
    t = _picked(ctx.x(i), 1 if layout else 0, d)  # (batch, hidden)
    return F.axes_with_order(conform(t, (axes[1], axes[0])).node, Axes(axes))


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
    seq, batch = x.shape[:2] if not layout else x.shape[1::-1]
    if seq * dirs > MAX_UNROLLED_STEPS:
        raise ShapeMismatch(f"a sequence of {seq} steps in {dirs} direction(s) is more than "
                            f"the {MAX_UNROLLED_STEPS} steps the importer unrolls")
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
    seq_pos, batch_pos = (1, 0) if layout else (0, 1)
    if ctx.has(4):
        lengths = ctx.need_const(4, "sequence_lens")
        if (np.ravel(lengths) != x.shape[seq_pos]).any():
            raise ctx.unsupported("sequence_lens shorter than the sequence")
    if ctx.op == "LSTM" and ctx.attr("input_forget", 0):
        raise ctx.unsupported("input_forget=1")
    direction = ctx.attr("direction", "forward")
    hidden = _check_shapes(ctx, x, direction, layout)
    batch, inputs = x.axes[batch_pos], x.axes[2]
    gate, state = temp_axis(hidden), temp_axis(hidden)
    steps = list(range(x.shape[seq_pos]))
    dtype = x.node.dtype
    per_direction = []
    for d, reverse in enumerate([direction == "reverse"] if direction != "bidirectional"
                                else [False, True]):
        cell = _Cell(ctx, d, (gate, state, inputs, batch))
        h = _initial(ctx, 5, d, layout, (state, batch), dtype)
        c = _initial(ctx, 6, d, layout, (gate, batch), dtype) if ctx.op == "LSTM" else None
        ys: dict[int, Node] = {}
        for t in reversed(steps) if reverse else steps:
            x_t = _picked(x, seq_pos, t).node
            y, c = _STEPS[ctx.op](cell, x_t, h, c)
            ys[t] = F.axes_with_order(y, Axes((gate, batch)))
            h = cell.to_state(y)
        per_direction.append(([ys[t] for t in steps], ys[steps[-1] if not reverse else 0], c))
    return _outputs(ctx, per_direction, layout, (gate, batch))


def _stacked(nodes, axes, pos: int, axis=None) -> Tensor:
    """Nodes of the same `axes` stacked along a new dimension (`axis`) at position pos."""
    parts = []
    for node in nodes:
        one = temp_axis(1)
        parts.append(Tensor(F.expand_dims(node, one, pos), axes[:pos] + (one,) + axes[pos:]))
    return join(parts, pos, axis or temp_axis(len(nodes)))


def _outputs(ctx: Context, per_direction, layout: int, axes) -> list:
    """Y (seq, dirs, batch, hidden), Y_h and Y_c (dirs, batch, hidden); batch first with
    layout=1."""
    gate, batch = axes
    outs = []
    wanted = [i < len(ctx.node.output) and bool(ctx.node.output[i]) for i in range(3)]
    if wanted[0]:
        seq = temp_axis(len(per_direction[0][0]))
        steps = [_stacked(ys, (gate, batch), 0, seq) for ys, _, _ in per_direction]
        y = _stacked([s.ordered() for s in steps], steps[0].axes, 1)  # (seq, dirs, G, batch)
        seq, dirs = y.axes[0], y.axes[1]
        order = (batch, seq, dirs, gate) if layout else (seq, dirs, batch, gate)
        outs.append(conform(Tensor(y.node, order), ctx.out_axes(0)))
    else:
        outs.append(None)
    for i, k in ((1, 1), (2, 2)):
        if not wanted[i] or (k == 2 and per_direction[0][2] is None):
            outs.append(None)
            continue
        last = _stacked([F.axes_with_order(p[k], Axes(axes)) for p in per_direction], axes, 0)
        dirs = last.axes[0]
        order = (batch, dirs, gate) if layout else (dirs, batch, gate)
        outs.append(conform(Tensor(last.node, order), ctx.out_axes(i)))
    return outs
