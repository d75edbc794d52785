"""ONNX LSTM, GRU and RNN: imported as one op each and written back as that ONNX op, against
onnxruntime, against their unrolled form (`unroll_recurrent`), and the laws of directions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_cases import check_against_ort, node_model, run_ort  # noqa: E402
from recurrent_reference import recurrent_reference  # noqa: E402

import ngrules as ng  # noqa: E402
from ngrules.interop.onnx.exporter import to_onnx  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402

RNG = np.random.default_rng(0)
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


CASES = [(op, d, e) for op in GATES for d, e in
         (("forward", {}), ("reverse", {"clip": 0.8}), ("bidirectional", {}))]


def _model(op, direction, layout=0, peepholes=False, **extra):
    seq, batch, size, hidden = 4, 2, 3, 5
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    x = RNG.standard_normal((batch, seq, size) if layout else (seq, batch, size))
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    inits = {
        "W": RNG.standard_normal((dirs, g * hidden, size)) * 0.5,
        "R": RNG.standard_normal((dirs, g * hidden, hidden)) * 0.5,
        "B": RNG.standard_normal((dirs, 2 * g * hidden)) * 0.5,
        "h0": RNG.standard_normal(state),
    }
    names = ["X", "W", "R", "B", "", "h0"]
    if peepholes:
        inits.update(c0=RNG.standard_normal(state), P=RNG.standard_normal((dirs, 3 * hidden)))
        names += ["c0", "P"]
    inits = {k: v.astype(np.float32) for k, v in inits.items()}
    feeds = {"X": x.astype(np.float32)}
    m = node_model(op, feeds, inits, n_out=3 if op == "LSTM" else 2, hidden_size=hidden,
                   direction=direction, layout=layout, **extra)
    node = m.graph.node[0]
    del node.input[:]
    node.input.extend(names)
    return m, feeds


def _unrolled(m, feeds):
    outputs = import_model(m, unroll_recurrent=True).outputs
    assert not {"LSTM", "GRU", "RNN"} & {n.op for n in ng.toposort(outputs)}
    return ng.execute(outputs, feeds)


@pytest.mark.parametrize("op, direction, extra", CASES + [
    ("GRU", "forward", {"linear_before_reset": 1}),
    ("LSTM", "bidirectional", {"activations": ["Relu", "Tanh", "Sigmoid"] * 2, "clip": 2.0}),
])
def test_recurrent_matches_onnxruntime_and_its_unrolled_form(op, direction, extra):
    """One node of the op, written back as one ONNX node of that op with its attributes."""
    m, feeds = _model(op, direction, peepholes=op == "LSTM", **extra)
    outputs = check_against_ort(m, feeds, rtol=1e-4, atol=1e-5)
    assert [n.op for n in ng.toposort(outputs)].count(op) == 1
    exported = to_onnx(outputs)
    assert [n.op_type for n in exported.graph.node] == [op]
    attrs = {a.name for a in exported.graph.node[0].attribute}
    assert set(extra) <= attrs and "layout" not in attrs
    for got, want in zip(_unrolled(m, feeds), run_ort(m, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_absent_inputs_stay_absent_and_zero_inputs_are_left_out():
    m, feeds = _model("GRU", "forward")
    del m.graph.node[0].input[3:]  # no B, no initial state
    outputs = check_against_ort(m, feeds)
    (node,) = to_onnx(outputs).graph.node
    assert list(node.input)[3:] == []


@pytest.mark.parametrize("op", sorted(GATES))
def test_batch_first_layout_runs_under_onnxruntime_and_equals_the_unrolled_form(op):
    """layout=1, which onnxruntime refuses: the op's kernel against the unrolled form and the
    step-by-step reference; the export is the op in ONNX's default layout between transposes,
    which onnxruntime runs, with the kernel's values."""
    m, feeds = _model(op, "bidirectional", layout=1, peepholes=op == "LSTM")
    outputs = import_model(m).outputs
    node = next(n for n in ng.toposort(outputs) if n.op == op)
    got = ng.execute(outputs, feeds)
    arrays = ng.execute(list(node.args), feeds, ignore_unused=True)
    for g, u, r in zip(got, _unrolled(m, feeds), recurrent_reference(node, arrays)):
        np.testing.assert_allclose(g, u, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)
    model = to_onnx(outputs)
    (written,) = [n for n in model.graph.node if n.op_type == op]
    assert "layout" not in [a.name for a in written.attribute]
    assert {n.op_type for n in model.graph.node} == {op, "Transpose"}
    for g, r in zip(got, run_ort(model, feeds)):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


def _layer(op, direction, x, weights, layout=0):
    """Y and Y_h of op over the given arrays (X, W, R, B, initial states...)."""
    leaves = [ng.placeholder([ng.Axis(f"{name}{i}", k) for i, k in enumerate(a.shape)],
                             np.float64, name=name) for name, a in zip("xwrbhcp", [x, *weights])]
    node = ng.make_node(op, tuple(leaves), direction=direction, layout=layout)
    feeds = dict(zip(leaves, [x, *weights]))
    return ng.execute(list(ng.outputs_of(node))[:2], feeds)


@settings(max_examples=10, deadline=None)
@given(op=st.sampled_from(sorted(GATES)), seq=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_bidirectional_is_forward_and_reverse_side_by_side_and_reverse_reads_time_backwards(
        op, seq, seed):
    """Laws of the directions: a bidirectional layer's two halves are a forward layer with the
    first direction's weights and a reverse one with the second's; a reverse layer over X is a
    forward one over X backwards in time, its Y backwards."""
    rng, batch, size, hidden, g = np.random.default_rng(seed), 2, 2, 3, GATES[op]
    x = rng.standard_normal((seq, batch, size))
    shapes = [(2, g * hidden, size), (2, g * hidden, hidden), (2, 2 * g * hidden),
              (2, batch, hidden)] + ([(2, batch, hidden), (2, 3 * hidden)] if op == "LSTM" else [])
    weights = [rng.standard_normal(s) * 0.5 for s in shapes]
    y, last = _layer(op, "bidirectional", x, weights)
    for d, direction in enumerate(("forward", "reverse")):
        y_d, last_d = _layer(op, direction, x, [w[d:d + 1] for w in weights])
        np.testing.assert_allclose(y[:, d:d + 1], y_d, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(last[d:d + 1], last_d, rtol=1e-12, atol=1e-12)
    one = [w[1:] for w in weights]
    y_rev, last_rev = _layer(op, "reverse", x, one)
    y_fwd, last_fwd = _layer(op, "forward", x[::-1].copy(), one)
    np.testing.assert_allclose(y_rev, y_fwd[::-1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(last_rev, last_fwd, rtol=1e-12, atol=1e-12)
