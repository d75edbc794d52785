"""LSTM, GRU and RNN nodes unrolled into primitives over their sequence: per step and
direction, `Dot`s of each gate's weights with the input and the previous hidden state, biases,
activations and the cell's elementwise update. Autodiff differentiates a recurrent node through
this form, and the ONNX importer writes it instead of the node when asked to unroll.

The hidden state lives on R's hidden axis (S), which the recurrent weights contract; the gates
come out on a fresh axis (G) of the same length, renamed to S for the next step.
"""

from __future__ import annotations

from ngrules.errors import OpError
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes, Axis
from ngrules.ir.graph import Node

#: op -> (gates, default activations of one direction, arguments after X, W, R, B).
CELLS = {"LSTM": (4, ("Sigmoid", "Tanh", "Tanh"), ("initial_h", "initial_c", "P")),
         "GRU": (3, ("Sigmoid", "Tanh"), ("initial_h",)),
         "RNN": (1, ("Tanh",), ("initial_h",))}
DIRECTIONS = ("forward", "reverse", "bidirectional")
_ACTIVATIONS = {"Sigmoid": F.sigmoid, "Tanh": F.tanh, "Relu": lambda v: F.maximum(v, 0.0)}
_ALL = slice(None)


def activations_of(op: str, attrs) -> list[tuple[str, ...]]:
    """The activation names of each direction (the attribute is comma-separated, every
    direction's in turn; empty for the defaults)."""
    per = CELLS[op][1]
    dirs = 2 if attrs["direction"] == "bidirectional" else 1
    names = tuple(n for n in attrs["activations"].split(",") if n) or per * dirs
    if len(names) != len(per) * dirs or not set(names) <= set(_ACTIVATIONS):
        raise OpError(f"{op}: activations {','.join(names)!r} are not {len(per)} per direction "
                      f"of {', '.join(_ACTIVATIONS)}")
    return [names[d * len(per):(d + 1) * len(per)] for d in range(dirs)]


class _Direction:
    """One direction of a recurrent node: slices of its weights per gate, activations."""

    def __init__(self, node: Node, d: int, gate: Axis):
        self.node, self.d, self.gate = node, d, gate
        x, self.w, self.r, self.b = node.args[:4]
        self.batch = x.axes[0 if node.attrs["layout"] else 1]
        self.inputs, self.state = x.axes[2], self.r.axes[2]
        self.gates, self.h = CELLS[node.op][0], self.state.length
        self.acts = [_ACTIVATIONS[a] for a in activations_of(node.op, node.attrs)[d]]
        self.clip = node.attrs["clip"]
        self.linear = node.attrs.get("linear_before_reset", 0)

    def rows(self, t: Node, k: int, axes) -> Node:
        """Rows k*h..(k+1)*h of direction d of a weight or bias, on `axes`."""
        rest = (_ALL,) * (len(t.axes) - 2)
        return F.tensor_slice(t, (self.d, slice(k * self.h, (k + 1) * self.h)) + rest, axes=axes)

    def gated(self, t: Node) -> Node:
        return F.axes_with_order(t, Axes((self.gate, self.batch)))

    def bias(self, k: int) -> Node:
        """Bias k of the flat B (W's biases, then R's), over (G, batch)."""
        return F.broadcast(self.rows(self.b, k, (self.gate,)), Axes((self.gate, self.batch)))

    def input_term(self, k: int, x_t: Node) -> Node:
        """W_k x_t + Wb_k over (G, batch)."""
        return self.gated(F.dot(self.rows(self.w, k, (self.gate, self.inputs)), x_t)) + \
            self.bias(k)

    def state_term(self, k: int, h: Node) -> Node:
        """R_k h + Rb_k over (G, batch)."""
        term = self.gated(F.dot(self.rows(self.r, k, (self.gate, self.state)), h))
        return term + self.bias(self.gates + k)

    def act(self, i: int, v: Node, clipped: bool = True) -> Node:
        if clipped and self.clip > 0:
            v = F.minimum(F.maximum(v, -self.clip), self.clip)
        return self.acts[i](v)

    def to_state(self, v: Node) -> Node:
        return F.cast_axes(self.gated(v), Axes((self.state, self.batch)))

    def step(self, x_t: Node, h: Node, c: Node | None):
        """(new hidden state over (G, batch), new cell)."""
        op = self.node.op
        if op == "RNN":
            return self.act(0, self.input_term(0, x_t) + self.state_term(0, h)), c
        if op == "GRU":
            z = self.act(0, self.input_term(0, x_t) + self.state_term(0, h))
            reset = self.act(0, self.input_term(1, x_t) + self.state_term(1, h))
            if self.linear:
                inner = self.input_term(2, x_t) + reset * self.state_term(2, h)
            else:
                reset_h = self.to_state(reset * self.from_state(h))
                inner = self.input_term(2, x_t) + self.state_term(2, reset_h)
            return (1.0 - z) * self.act(1, inner) + z * self.from_state(h), c
        p = self.node.args[6]
        pre = [self.input_term(k, x_t) + self.state_term(k, h) for k in range(4)]
        peep = [F.broadcast(self.rows(p, k, (self.gate,)), Axes((self.gate, self.batch)))
                for k in range(3)]
        i = self.act(0, pre[0] + peep[0] * c)
        forget = self.act(0, pre[2] + peep[2] * c)
        c = forget * c + i * self.act(1, pre[3])
        o = self.act(0, pre[1] + peep[1] * c)
        return o * self.act(2, c, clipped=False), c

    def from_state(self, h: Node) -> Node:
        return F.cast_axes(F.axes_with_order(h, Axes((self.state, self.batch))),
                           Axes((self.gate, self.batch)))

    def initial(self, t: Node, axis: Axis) -> Node:
        """Direction d of an initial state, over (axis, batch)."""
        at = (_ALL, self.d, _ALL) if self.node.attrs["layout"] else (self.d, _ALL, _ALL)
        sliced = F.tensor_slice(t, at, axes=(self.batch, axis))
        return F.axes_with_order(sliced, Axes((axis, self.batch)))


def _fresh(node: Node, length: int) -> Axis:
    taken = {a.name for arg in node.args for a in arg.axes}
    name = next(f"G{i}" for i in range(len(taken) + 1) if f"G{i}" not in taken)
    return Axis(name, length)


def _stacked(parts: list[Node], axis: Axis) -> Node:
    """Nodes of one axes stacked along `axis` (first), one position each."""
    unit = Axis(axis.name, 1)
    return F.concat_along_axis([F.expand_dims(p, unit, 0) for p in parts], unit)


def unrolled(node: Node) -> tuple[Node, ...]:
    """The outputs of a recurrent node (Y, Y_h[, Y_c]) built from primitives on its arguments,
    with the node's outputs' axes."""
    x, r = node.args[0], node.args[2]
    layout, seq = node.attrs["layout"], node.args[0].axes[1 if node.attrs["layout"] else 0]
    steps = range(seq.length)
    dirs = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[
        node.attrs["direction"]]
    gate = _fresh(node, r.axes[2].length)
    ys, hs, cs = [], [], []
    for d, backwards in enumerate(dirs):
        cell = _Direction(node, d, gate)
        h = cell.initial(node.args[4], cell.state)
        c = cell.initial(node.args[5], gate) if node.op == "LSTM" else None
        out: dict[int, Node] = {}
        for t in reversed(steps) if backwards else steps:
            x_t = F.tensor_slice(x, (_ALL, t, _ALL) if layout else (t, _ALL, _ALL))
            y, c = cell.step(x_t, h, c)
            out[t] = cell.to_state(y)
            h = out[t]
        ys.append(_stacked([out[t] for t in steps], seq))
        hs.append(h)
        cs.append(None if c is None else cell.to_state(c))
    dirs_axis = r.axes[0]
    results = [_stacked(ys, dirs_axis), _stacked(hs, dirs_axis)]
    if node.op == "LSTM":
        results.append(_stacked(cs, dirs_axis))
    return tuple(F.axes_with_order(v, axes) for v, (axes, _) in zip(results, node.outputs))
