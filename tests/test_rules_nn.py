"""rules/nn.rules: activations and normalisations fused, batchnorm folded, cross-entropy forms."""

from collections import Counter

import numpy as np
import pytest
from helpers import random_feeds
from hypothesis import given, settings
from hypothesis import strategies as st

import ngrules as ng
from ngrules.ir import layers as L
from ngrules.lang.library import library_path

C, N, K = ng.make_axis(4, "C"), ng.make_axis(3, "N"), ng.make_axis(5, "K")


@pytest.fixture(scope="module")
def library():
    return ng.load_library()


def _ops(outputs) -> Counter:
    return Counter(n.op for n in ng.toposort(outputs))


def _same_values(before, after, feeds, rtol=1e-9):
    for b, a in zip(ng.execute(before, feeds), ng.execute(after, feeds)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)


def test_every_nn_rule_verifies(library):
    own = str(library_path() / "nn.rules")
    rules = [r for r in library if r.span.file == own]
    assert len(rules) == 25  # batchnorm folding is in batchnorm.rules
    report = ng.verify(rules, 15)
    assert report.ok, str(report)


def test_a_training_graph_fuses_each_layer_and_keeps_values_and_gradients(library):
    x = ng.placeholder([C, N], np.float64, name="x")
    w = ng.variable([K, C], np.float64, name="w", initial=0.3)
    gamma = ng.variable([K], np.float64, name="g", initial=1.2)
    beta = ng.variable([K], np.float64, name="b", initial=0.1)
    a = L.gelu(L.layer_norm(ng.dot(w, x), gamma, beta, [K]))
    y = L.softmax(L.sigmoid(a) * 3.0, [K])
    cost = ng.sum(y * a, out_axes=())
    outputs = [cost, *(ng.deriv(cost, p) for p in (w, x, gamma, beta))]
    res = ng.rewrite(outputs, library, pipeline="fuse_nn", checked=True)
    fired = res.fired()
    for rule in ("sigmoid_reciprocal_bprop", "sigmoid_reciprocal", "softmax", "softmax_bprop",
                 "gelu"):
        assert fired.get(rule) == 1, fired
    assert fired.get("layer_norm") == fired.get("layer_norm_bprop") == 1, fired
    ops = _ops(res.outputs)
    assert all(ops[op] == 1 for op in ("Sigmoid", "Softmax", "Gelu", "LayerNorm")), ops
    assert ops["LayerNormBprop"] == 1, ops
    xv = np.random.default_rng(0).normal(size=(4, 3))
    _same_values(outputs, res.outputs, {x: xv})


@pytest.mark.parametrize(
    "form, rules",
    [
        (lambda x: 1.0 / (1.0 + ng.exp(-x)), {"sigmoid_bprop": 1, "sigmoid": 1}),
        (L.sigmoid, {"sigmoid_reciprocal_bprop": 1, "sigmoid_reciprocal": 1}),  # ngraph's
    ],
    ids=["divide", "reciprocal"],
)
def test_sigmoid_backward_fuses_into_sigmoid_alone(library, form, rules):
    x = ng.placeholder([C, N], np.float64, name="x")
    cost = ng.sum(form(x) * x, out_axes=())
    outputs = [cost, ng.deriv(cost, x)]
    res = ng.rewrite(outputs, library, passes=["nn_bprop", "nn_fusion"])
    assert res.fired() == rules
    assert "Exp" not in _ops(res.outputs)  # no primitive sigmoid left, forward or backward
    _same_values(outputs, res.outputs, {x: np.linspace(-3, 3, 12).reshape(4, 3)})


def test_inference_folds_batchnorm_into_the_weights(library):
    x = ng.placeholder([C, N], np.float64, name="x")
    w = ng.variable([K, C], np.float64, name="w", initial=0.3)
    gamma = ng.variable([K], np.float64, name="g", initial=1.2)
    beta = ng.variable([K], np.float64, name="b", initial=0.1)
    mean = ng.constant(np.linspace(0.1, 0.5, 5), [K], dtype=np.float64)
    var = ng.constant(np.linspace(1.0, 2.0, 5), [K], dtype=np.float64)
    y = L.batchnorm_inference(ng.dot(w, x), gamma, beta, mean, var)
    res = ng.rewrite([y], library, pipeline="inference", checked=True)
    assert res.fired()["fold_batchnorm_dot"] == 1
    (dot,) = [n for n in ng.toposort(res.outputs) if n.op in ("Dot", "DotLowDimension")]
    assert dot.args[0].op == "Multiply"  # the weights, scaled per output channel
    assert _ops(res.outputs)["Subtract"] == 1  # beta - mean * s only: nothing of shape [K, N]
    _same_values([y], res.outputs, {x: np.random.default_rng(1).normal(size=(4, 3))})


def test_batchnorm_with_batch_statistics_is_not_folded(library):
    x = ng.placeholder([C, N], np.float64, name="x")
    w = ng.variable([K, C], np.float64, name="w")
    gamma, beta = ng.variable([K], np.float64, name="g"), ng.variable([K], np.float64, name="b")
    y = L.batchnorm(ng.dot(w, x), gamma, beta)
    res = ng.rewrite([y], library, passes=["fold_batchnorm"])
    assert res.fired() == {}


def test_binary_cross_entropy_of_a_sigmoid_takes_ngraphs_form(library):
    x = ng.placeholder([N], np.float64, name="x")
    t = ng.placeholder([N], np.float64, name="t")
    loss = ng.cross_entropy_binary(L.sigmoid(x), t, enable_sig_opt=False)
    res = ng.rewrite([loss], library, pipeline="fuse_nn")
    assert res.fired()["cross_entropy_binary_sigmoid"] == 1
    logs = [n for n in ng.toposort(res.outputs) if n.op == "Log"]
    assert len(logs) == 1  # safelog(y) only; safelog(1 - y) is gone
    feeds = {x: np.array([-4.0, 0.3, 5.0]), t: np.array([0.0, 1.0, 0.25])}
    _same_values([loss], res.outputs, feeds, rtol=1e-7)


def test_log_of_a_softmax_becomes_a_log_softmax(library):
    x = ng.placeholder([C, N], np.float64, name="x")
    y = ng.log(ng.softmax(x, [C]))
    res = ng.rewrite([y], library, passes=["cross_entropy"])
    assert res.fired() == {"log_softmax": 1} and _ops(res.outputs)["Softmax"] == 0
    _same_values([y], res.outputs, {x: np.linspace(-20, 20, 12).reshape(4, 3)})


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_the_library_ops_generate_instances_that_run(data):
    ng.load_library()
    for name in ("LayerNorm", "Gelu"):
        node = ng.OPS[name].gen(data.draw, lambda axes: ng.placeholder(axes, np.float64))
        assert node.op == name
        (value,) = ng.execute([node], random_feeds([node], 0))
        assert value.shape == node.axes.lengths and np.isfinite(value).all()
