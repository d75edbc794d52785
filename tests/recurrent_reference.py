"""ONNX's LSTM, GRU and RNN written out from the operator's equations, step by step and batch
row by batch row, for checking the op table's kernels (which precompute and vectorise)."""

import numpy as np

_F = {"Sigmoid": lambda v: 1 / (1 + np.exp(-v)), "Tanh": np.tanh,
      "Relu": lambda v: np.maximum(v, 0)}
_DEFAULT = {"LSTM": "Sigmoid,Tanh,Tanh", "GRU": "Sigmoid,Tanh", "RNN": "Tanh"}


def _cell(op, a, f, x, h, c, w, r, wb, rb, p):
    """One step of one batch row: the new (h, c)."""
    n = len(h)
    clip = a["clip"]

    def act(k, v, clipped=True):
        return _F[f[k]](np.clip(v, -clip, clip) if clip > 0 and clipped else v)

    def gate(k, state=None):
        state = h if state is None else state
        return w[k * n:(k + 1) * n] @ x + r[k * n:(k + 1) * n] @ state + wb[k * n:(k + 1) * n] \
            + rb[k * n:(k + 1) * n]

    if op == "RNN":
        return act(0, gate(0)), c
    if op == "GRU":
        z, reset = act(0, gate(0)), act(0, gate(1))
        if a["linear_before_reset"]:
            inner = w[2 * n:] @ x + wb[2 * n:] + reset * (r[2 * n:] @ h + rb[2 * n:])
        else:
            inner = gate(2, reset * h)
        return (1 - z) * act(1, inner) + z * h, c
    i = act(0, gate(0) + p[:n] * c)
    forget = act(0, gate(2) + p[2 * n:] * c)
    c = forget * c + i * act(1, gate(3))
    o = act(0, gate(1) + p[n:2 * n] * c)
    return o * act(2, c, clipped=False), c  # as onnxruntime: the cell's output unclipped


def recurrent_reference(n, vals):
    """(Y, Y_h[, Y_c]) of node n from its arguments' values."""
    op, a = n.op, n.attrs
    x, w, r, b, h0 = (np.asarray(v, np.float64) for v in vals[:5])
    c0, p = (vals[5], vals[6]) if op == "LSTM" else (np.zeros_like(h0), None)
    if a["layout"]:
        x, h0, c0 = x.swapaxes(0, 1), h0.swapaxes(0, 1), np.swapaxes(c0, 0, 1)
    names = (a["activations"] or ",".join([_DEFAULT[op]] * len(w))).split(",")
    per = len(names) // len(w)
    seq, batch, hidden = x.shape[0], x.shape[1], r.shape[2]
    y = np.zeros((seq, len(w), batch, hidden))
    last_h, last_c = np.zeros_like(h0), np.zeros_like(h0)
    for d in range(len(w)):
        backwards = a["direction"] == "reverse" or d == 1
        half = len(b[d]) // 2
        for row in range(batch):
            h, c = h0[d, row], c0[d, row]
            for t in reversed(range(seq)) if backwards else range(seq):
                h, c = _cell(op, a, names[d * per:(d + 1) * per], x[t, row], h, c, w[d], r[d],
                             b[d, :half], b[d, half:], None if p is None else p[d])
                y[t, d, row] = h
            last_h[d, row], last_c[d, row] = h, c
    outs = [y, last_h] + ([last_c] if op == "LSTM" else [])
    if a["layout"]:
        outs = [y.transpose(2, 0, 1, 3)] + [o.swapaxes(0, 1) for o in outs[1:]]
    return tuple(outs)
