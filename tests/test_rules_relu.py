"""rules/relu.rules and the fused Relu/ReluBprop ops: leaky relu and its autodiff gradient fuse,
with equal values, at x = 0 too; lookalikes that differ somewhere stay unfused."""

from pathlib import Path

import numpy as np
import pytest
from helpers import tolerance

import ngrules as ng
from ngrules.ir.graph import toposort

RULES = Path(__file__).resolve().parent.parent / "rules"
C, N = ng.make_axis(3, "C"), ng.make_axis(4, "N")


@pytest.fixture(scope="module")
def rules():
    return ng.load_rules(RULES)


def leaky(x, slope, form="ngraph"):
    """max(x, 0) + slope * min(0, x) as ngraph's neon wrote it, or a lookalike."""
    if form == "min-x-first":  # the same function; autodiff's gradient differs at x = 0
        return ng.maximum(x, 0.0) + slope * ng.minimum(x, 0.0)
    if form == "threshold":  # not a relu at all
        return ng.maximum(x, 0.5) + slope * ng.minimum(0.5, x)
    return ng.maximum(x, 0.0) + slope * ng.minimum(0.0, x)


def graph(dtype, slope, form="ngraph"):
    x = ng.placeholder([C, N], dtype, name="x")
    delta = ng.placeholder([C, N], dtype, name="delta")
    y = leaky(x, slope, form)
    dx = ng.deriv(ng.sum(ng.tanh(y) * delta, out_axes=()), x)
    rng = np.random.default_rng(3)
    xv = rng.uniform(-2, 2, (3, 4)).astype(dtype)
    xv[0, :2] = 0.0  # the kink: both sides must agree there too
    feeds = {"x": xv, "delta": rng.uniform(-2, 2, (3, 4)).astype(dtype)}
    if isinstance(slope, ng.Node):
        feeds["slope"] = np.asarray(0.3, dtype)
    return [y, dx], feeds


def rewrite(rules, outputs):
    res = ng.rewrite(outputs, rules, pipeline="cpu", checked=True)
    assert res.stop == "fixpoint"
    return res, {n.op for n in toposort(res.outputs)}


@pytest.mark.parametrize("slope", [0.1, 0.0, 2.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_relu_forward_and_backward_fuse_with_equal_values(rules, dtype, slope):
    outputs, feeds = graph(dtype, slope)
    res, ops = rewrite(rules, outputs)
    assert res.fired()["relu_fprop"] == res.fired()["relu_bprop"] == 1
    assert {"Relu", "ReluBprop"} <= ops and not {"Maximum", "Minimum", "Greater", "Less"} & ops
    got = ng.execute(res.outputs, feeds)
    for g, w in zip(got, ng.execute(outputs, feeds)):
        np.testing.assert_array_equal(g, w)  # the kernels compute exactly what the graph did
    xv = np.float64(feeds["x"])
    np.testing.assert_allclose(got[0], np.where(xv > 0, xv, slope * xv), **tolerance(dtype))


@pytest.mark.parametrize("form", ["min-x-first", "threshold"])
def test_lookalikes_keep_their_own_gradient(rules, form):
    outputs, feeds = graph(np.float64, 0.1, form)
    res, ops = rewrite(rules, outputs)
    assert "relu_bprop" not in res.fired() and "ReluBprop" not in ops
    assert ("Relu" in ops) == (form == "min-x-first")  # the forward value is the same function
    for g, w in zip(ng.execute(res.outputs, feeds), ng.execute(outputs, feeds)):
        np.testing.assert_array_equal(g, w)


def test_a_slope_that_is_not_a_constant_is_not_fused(rules):
    slope = ng.placeholder([], np.float64, name="slope")
    outputs, feeds = graph(np.float64, slope)
    res, ops = rewrite(rules, outputs)
    assert not {"relu_fprop", "relu_bprop"} & set(res.fired())
    for g, w in zip(ng.execute(res.outputs, feeds), ng.execute(outputs, feeds)):
        np.testing.assert_array_equal(g, w)


# -- the fused ops themselves --------------------------------------------------------------------
def test_relu_gradient_is_relu_bprop_and_matches_the_unfused_gradient():
    x = ng.placeholder([C, N], np.float64, name="x")
    delta = ng.placeholder([C, N], np.float64, name="delta")
    fused = ng.make_node("Relu", (x,), slope=0.25)
    dx = ng.deriv(ng.sum(fused * delta, out_axes=()), x)
    assert dx.op == "ReluBprop" and dx.attrs["slope"] == 0.25
    unfused = ng.deriv(ng.sum(leaky(x, 0.25) * delta, out_axes=()), x)
    rng = np.random.default_rng(4)
    feeds = {x: rng.normal(size=(3, 4)), delta: rng.normal(size=(3, 4))}
    feeds[x][1, 1] = 0.0
    np.testing.assert_array_equal(*ng.execute([dx, unfused], feeds))


def test_relu_bprop_is_linear_in_delta_and_flat_in_x():
    x = ng.placeholder([C], np.float64, name="x")
    delta = ng.placeholder([C], np.float64, name="delta")
    back = ng.make_node("ReluBprop", (delta, x), slope=0.5)
    cost = ng.sum(back * back, out_axes=())
    feeds = {x: np.array([-1.0, 0.0, 2.0]), delta: np.array([1.0, 2.0, 3.0])}
    d_delta, d_x = ng.execute([ng.deriv(cost, delta), ng.deriv(cost, x)], feeds)
    np.testing.assert_allclose(d_delta, 2 * np.array([0.5, 1.0, 3.0]) * [0.5, 0.5, 1.0])
    np.testing.assert_array_equal(d_x, 0.0)
