"""ONNX LSTM, GRU and RNN, unrolled into primitives, against onnxruntime (and exported back)."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_cases import check_against_ort, node_model  # noqa: E402

import ngrules as ng  # noqa: E402

RNG = np.random.default_rng(0)
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


CASES = [(op, d, e) for op in GATES for d, e in
         (("forward", {}), ("reverse", {"clip": 0.8}), ("bidirectional", {}))]


@pytest.mark.parametrize("op, direction, extra", CASES + [
    ("GRU", "forward", {"linear_before_reset": 1}),
])
def test_recurrent_matches_onnxruntime(op, direction, extra):
    """(batch-first layout=1, which onnxruntime refuses, passes ONNX's own node tests)"""
    layout = 0
    seq, batch, size, hidden = 4, 2, 3, 5
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    x = RNG.standard_normal((batch, seq, size) if layout else (seq, batch, size))
    h0 = RNG.standard_normal((batch, dirs, hidden) if layout else (dirs, batch, hidden))
    inits = {
        "W": RNG.standard_normal((dirs, g * hidden, size)) * 0.5,
        "R": RNG.standard_normal((dirs, g * hidden, hidden)) * 0.5,
        "B": RNG.standard_normal((dirs, 2 * g * hidden)) * 0.5,
    }
    inits = {k: v.astype(np.float32) for k, v in inits.items()}
    feeds = {"X": x.astype(np.float32)}
    names = ["X", "W", "R", "B", "", "h0"]
    n_out = 3 if op == "LSTM" else 2
    m = node_model(op, feeds, {**inits, "h0": h0.astype(np.float32)}, n_out=n_out,
                   hidden_size=hidden, direction=direction, layout=layout, **extra)
    node = m.graph.node[0]
    del node.input[:]
    node.input.extend(names)
    outputs = check_against_ort(m, feeds, rtol=1e-4, atol=1e-5)
    assert not {"Loop", "Scan"} & {n.op for n in ng.toposort(outputs)}
