"""Recurrent layers as single ops: LSTM, GRU and RNN with ONNX's semantics (gates, biases,
activations, clip, peepholes, directions, both layouts), run by a numpy loop over the sequence.

The arguments are read by position, in ONNX's order of dimensions (a recurrent layer's
dimensions are roles, not names): X (seq, batch, input), W (dirs, gates x hidden, input),
R (dirs, gates x hidden, hidden), B (dirs, 2 x gates x hidden), the initial hidden state (dirs,
batch, hidden), for LSTM the initial cell (same) and the peepholes P (dirs, 3 x hidden); with
`layout=1` batch comes first in X and the states. Absent ONNX inputs are zeros here. Outputs:
Y (seq, dirs, batch, hidden) or (batch, seq, dirs, hidden), the last hidden state and, for LSTM,
the last cell, both (dirs, batch, hidden) or (batch, dirs, hidden); their axes are X's seq and
batch, R's first (dirs) and last (hidden).
"""

from __future__ import annotations

import functools

import numpy as np

from ngrules.errors import OpError
from ngrules.ir.axes import Axes
from ngrules.ir.builtin.common import float_dtype
from ngrules.ir.graph import make_node
from ngrules.ir.ops import AttrSpec, register_op
from ngrules.ir.unrolled import CELLS, DIRECTIONS, activations_of

ACTIVATIONS = {"Sigmoid": lambda x: 0.5 * (np.tanh(0.5 * x) + 1.0),  # no overflow warning
               "Tanh": np.tanh, "Relu": lambda x: np.maximum(x, 0)}


def _infer(op: str):
    gates, _, extra = CELLS[op]

    def infer(args, attrs):
        x, w, r = args[:3]
        dtype = float_dtype(op, args)
        if attrs["direction"] not in DIRECTIONS:
            raise OpError(f"{op}: direction {attrs['direction']!r} is not one of {DIRECTIONS}")
        activations_of(op, attrs)
        if len(x.axes) != 3 or len(w.axes) != 3 or len(r.axes) != 3:
            raise OpError(f"{op}: X, W and R need 3 axes, got {x.axes!r}, {w.axes!r}, {r.axes!r}")
        layout = attrs["layout"]
        seq, batch = (x.axes[1], x.axes[0]) if layout else (x.axes[0], x.axes[1])
        dirs, hidden = r.axes[0], r.axes[2]
        d, size, h = dirs.length, x.axes[2].length, hidden.length
        state = (batch.length, d, h) if layout else (d, batch.length, h)
        wanted = [(d, gates * h, size), (d, gates * h, h), (d, 2 * gates * h)]
        wanted += [state, state, (d, 3 * h)][:len(extra)]
        for name, arg, shape in zip(("W", "R", "B", *extra), args[1:], wanted):
            if arg.axes.lengths != shape:
                raise OpError(f"{op}: {name} has shape {arg.axes.lengths}, not {shape}")
        if d != 1 + (attrs["direction"] == "bidirectional"):
            raise OpError(f"{op}: {d} directions for direction {attrs['direction']!r}")
        y = Axes((batch, seq, dirs, hidden) if layout else (seq, dirs, batch, hidden))
        last = Axes((batch, dirs, hidden) if layout else (dirs, batch, hidden))
        if len(set(y.names)) != 4:
            raise OpError(f"{op}: the output's axes {y!r} must have distinct names")
        return ((y, dtype), (last, dtype)) + (((last, dtype),) if op == "LSTM" else ())

    return infer


def _clipped(clip: float):
    return (lambda v: v) if clip <= 0 else (lambda v: np.clip(v, -clip, clip))


def _lstm_step(acts, clip, xw, h, c, r, rb, p):
    """One LSTM step (gates i, o, f, c in ONNX's order; peepholes i, o, f)."""
    f, g, act = acts
    pre = xw + h @ r.T + rb
    i_, o_, f_, c_ = np.split(pre, 4, axis=-1)
    pi, po, pf = np.split(p, 3)
    i = f(clip(i_ + pi * c))
    forget = f(clip(f_ + pf * c))
    c = forget * c + i * g(clip(c_))
    o = f(clip(o_ + po * c))
    return o * act(c), c


def _gru_step(acts, clip, xw, h, c, r, rb, linear):
    """One GRU step (gates z, r, h); `linear` applies the reset after the recurrent product."""
    f, g = acts
    hidden = h.shape[-1]
    xz, xr, xh = np.split(xw, 3, axis=-1)
    rz, rr, rh = r[:hidden], r[hidden:2 * hidden], r[2 * hidden:]
    bz, br, bh = np.split(rb, 3)
    z = f(clip(xz + h @ rz.T + bz))
    reset = f(clip(xr + h @ rr.T + br))
    if linear:
        candidate = g(clip(xh + reset * (h @ rh.T + bh)))
    else:
        candidate = g(clip(xh + (reset * h) @ rh.T + bh))
    return (1 - z) * candidate + z * h, c


def _rnn_step(acts, clip, xw, h, c, r, rb, _):
    return acts[0](clip(xw + h @ r.T + rb)), c


_STEPS = {"LSTM": _lstm_step, "GRU": _gru_step, "RNN": _rnn_step}


def _kernel(op: str):
    def kernel(node):
        attrs = node.attrs
        acts = [[ACTIVATIONS[a] for a in names] for names in activations_of(op, attrs)]
        clip, layout, step = _clipped(attrs["clip"]), attrs["layout"], _STEPS[op]
        reverse = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[
            attrs["direction"]]

        def run(x, w, r, b, h0, c0=None, p=None):
            if layout:
                x, h0 = x.swapaxes(0, 1), h0.swapaxes(0, 1)
                c0 = None if c0 is None else c0.swapaxes(0, 1)
            gh = w.shape[1]
            ys, hs, cs = [], [], []
            for d, backwards in enumerate(reverse):
                xw = x @ w[d].T + b[d, :gh]  # every step's input term at once
                h, c = h0[d], None if c0 is None else c0[d]
                extra = p[d] if op == "LSTM" else attrs.get("linear_before_reset", 0)
                y = np.empty(x.shape[:2] + (r.shape[2],), x.dtype)
                for t in range(x.shape[0])[::-1] if backwards else range(x.shape[0]):
                    h, c = step(acts[d], clip, xw[t], h, c, r[d], b[d, gh:], extra)
                    y[t] = h
                ys.append(y)
                hs.append(h)
                cs.append(c)
            y, outs = np.stack(ys, 1), [np.stack(hs)] + ([np.stack(cs)] if c0 is not None else [])
            if layout:
                y, outs = y.transpose(2, 0, 1, 3), [o.swapaxes(0, 1) for o in outs]
            return tuple(np.asarray(o, x.dtype) for o in (y, *outs))

        return run

    return kernel


def _gen(op: str):
    """A small layer over random weights, with random direction, layout, clip and (GRU)
    reset placement."""

    def gen(draw, leaf):
        from hypothesis import strategies as st

        from ngrules.ir.axes import Axis

        gates, _, extra = CELLS[op]
        direction = draw(st.sampled_from(DIRECTIONS))
        layout, d = draw(st.integers(0, 1)), 1 + (direction == "bidirectional")
        seq, batch, size, h = (draw(st.integers(1, 2)) for _ in range(4))
        s, n, i = Axis("S", seq), Axis("N", batch), Axis("I", size)
        dirs, hidden = Axis("D", d), Axis("H", h)
        g, g2, p3 = Axis("G", gates * h), Axis("G2", 2 * gates * h), Axis("P3", 3 * h)
        state = (n, dirs, hidden) if layout else (dirs, n, hidden)
        args = [leaf(Axes((n, s, i) if layout else (s, n, i))), leaf(Axes((dirs, g, i))),
                leaf(Axes((dirs, g, hidden))), leaf(Axes((dirs, g2)))]
        args += [leaf(Axes(a)) for a in (state, state, (dirs, p3))[:len(extra)]]
        attrs = {"direction": direction, "layout": layout,
                 "clip": draw(st.sampled_from((0.0, 0.5)))}
        if op == "GRU":
            attrs["linear_before_reset"] = draw(st.integers(0, 1))
        return make_node(op, tuple(args), **attrs)

    return gen


def _grad(node, deltas):
    return _adjoints(node, tuple(deltas))


@functools.lru_cache(maxsize=16)
def _adjoints(node, deltas):
    """Through the unrolled form (`ir/unrolled.py`), built on stand-ins for the arguments (kept
    for a while: each `deriv` of a graph asks again)."""
    from ngrules.ir.autodiff import adjoints_through
    from ngrules.ir.unrolled import unrolled  # beside the table import: not needed at load

    stand_ins = [make_node("Placeholder", name=f"{node.op}.arg{i}", axes=a.axes, dtype=a.dtype)
                 for i, a in enumerate(node.args)]
    outputs = unrolled(make_node(node.op, tuple(stand_ins), **node.attrs))
    return adjoints_through(stand_ins, outputs, node.args, deltas, node.op)


def _attrs(op: str) -> tuple[AttrSpec, ...]:
    common = (
        AttrSpec("direction", "str", "forward", "forward, reverse or bidirectional"),
        AttrSpec("layout", "int", 0, "1: batch before sequence in X and the states"),
        AttrSpec("activations", "str", "", "Sigmoid, Tanh or Relu per function and direction, "
                 "comma-separated (empty: ONNX's defaults)"),
        AttrSpec("clip", "float", 0.0, "pre-activations clipped to [-clip, clip] (0: not)"),
    )
    if op == "GRU":
        return common + (AttrSpec("linear_before_reset", "int", 0,
                                  "1: the reset gate scales R_h h + Rb_h"),)
    return common


for _op, (_gates, _acts, _extra) in CELLS.items():
    register_op(
        _op,
        arity=4 + len(_extra),
        attrs=_attrs(_op),
        infer=_infer(_op),
        kernel=_kernel(_op),
        grad=_grad,
        gen=_gen(_op),
        traits={"multi_output", "fused"},
        outputs=3 if _op == "LSTM" else 2,
        doc=f"ONNX's {_op} over X, W, R, B, {', '.join(_extra)} (by position, in ONNX's order "
            f"of dimensions): (Y, Y_h{', Y_c' if _op == 'LSTM' else ''})",
    )
