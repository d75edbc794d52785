"""Reverse-mode autodiff against float64 central finite differences."""

import numpy as np
import pytest
from helpers import (
    central_difference,
    directional_difference,
    draw_op_instance,
    placeholder_domains,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import ngrules as ng

NOT_DIFFERENTIABLE = {n for n, op in ng.OPS.items() if isinstance(op.grad, ng.NotDifferentiable)}
DIFFERENTIABLE = sorted(
    n for n, op in ng.OPS.items() if op.arity != 0 and n not in NOT_DIFFERENTIABLE
)


def test_only_output_bprops_and_positions_are_not_differentiable():
    # read the table now: ops declared in rules files loaded by earlier tests count too
    table = dict(ng.OPS)
    without = {n for n, op in table.items() if isinstance(op.grad, ng.NotDifferentiable)}
    assert {"Output", "BatchnormBprop", "BpropPool", "Argmax", "Argmin", "OneHot",
            "TopKIndices", "BitCast"} == without
    leaves = {n for n, op in table.items() if op.arity == 0}
    assert leaves == {"Placeholder", "Constant", "Variable"}
    assert all(callable(op.grad) for n, op in table.items() if n not in without | leaves)


def weighted_cost(outputs, seed: int):
    """sum(output * W) over the outputs, each W a fixed random constant of the output's axes."""
    rng = np.random.default_rng(seed)
    outputs = [ng.cast(o, np.float64) for o in outputs]
    terms = [
        ng.sum(o * ng.constant(rng.normal(size=o.axes.lengths), o.axes, np.float64), out_axes=())
        for o in outputs
    ]
    cost = terms[0]
    for term in terms[1:]:
        cost = cost + term
    return cost


def check_gradients(cost, feeds, seed: int, rtol=1e-5, atol=1e-6):
    """deriv(cost, p) for every fed p agrees with a central difference along a random direction."""
    program = ng.compile_graph([cost])
    grads = ng.execute([ng.deriv(cost, p) for p in feeds], feeds, ignore_unused=True)
    rng = np.random.default_rng(seed)
    for (p, value), grad in zip(feeds.items(), grads):
        assert grad.shape == p.axes.lengths and grad.dtype == p.dtype

        def f(v, p=p):
            return program.run({**feeds, p: v})[0].item()

        direction = rng.normal(size=value.shape)
        fd = directional_difference(f, value, direction)
        got = np.sum(grad * direction)
        np.testing.assert_allclose(got, fd, rtol=rtol, atol=atol, err_msg=p.name)


#: Cast rounds to the target dtype, so tiny central differences see steps: checked below.
ROUNDING = {"Cast"}


#: Ops whose gradient goes through an unrolled loop (a graph of hundreds of nodes per
#: instance): fewer examples, to keep the suite's time.
UNROLLED = {"LSTM", "GRU", "RNN"}


def _check_op_gradient(name, data):
    node, outputs, feeds = draw_op_instance(data, name, np.float64)
    seed = data.draw(st.integers(0, 2**16), label="weights")
    check_gradients(weighted_cost(outputs, seed), feeds, seed)


@pytest.mark.parametrize("name", sorted(set(DIFFERENTIABLE) - ROUNDING - UNROLLED))
@given(data=st.data())
def test_deriv_matches_finite_differences(name, data):
    _check_op_gradient(name, data)


@pytest.mark.parametrize("name", sorted(UNROLLED))
@settings(max_examples=12)
@given(data=st.data())
def test_recurrent_deriv_matches_finite_differences(name, data):
    _check_op_gradient(name, data)


@pytest.mark.parametrize("builder", [ng.greater, ng.less], ids=["greater", "less"])
def test_comparisons_have_zero_gradients(builder):
    x = ng.placeholder({"A": 3, "B": 2}, np.float64, name="x")
    y = ng.placeholder({"A": 3, "B": 2}, np.float64, name="y")
    cost = ng.sum(builder(x, y) * (x + y), out_axes=())
    rng = np.random.default_rng(0)
    feeds = {x: rng.normal(size=(3, 2)), y: rng.normal(size=(3, 2))}
    gx, gy = ng.execute([ng.deriv(cost, x), ng.deriv(cost, y)], feeds, ignore_unused=True)
    want = (feeds[x] > feeds[y]) if builder is ng.greater else (feeds[x] < feeds[y])
    assert builder(x, y).dtype == np.bool_
    np.testing.assert_array_equal(gx, want.astype(float))
    np.testing.assert_array_equal(gy, want.astype(float))
    zero = ng.deriv(ng.sum(ng.cast(builder(x, y), np.float64), out_axes=()), x)
    zero_value = ng.execute([zero], feeds, ignore_unused=True)[0]
    np.testing.assert_array_equal(zero_value, np.zeros((3, 2)))


def test_domains_are_respected_by_the_drawn_values():
    x = ng.placeholder({"A": 4}, np.float64, name="dx")
    y = ng.placeholder({"A": 4}, np.float64, name="dy")
    z = ng.placeholder({"A": 4}, np.float64, name="dz")
    domains = placeholder_domains([ng.log(x) / y + z * ng.sqrt(y)])
    assert domains == {x: "positive", y: "positive", z: "real"}
    assert placeholder_domains([x / y]) == {x: "real", y: "nonzero"}


def test_deriv_has_wrt_axes_and_zero_for_unrelated_inputs():
    x = ng.placeholder({"C": 2, "N": 3}, np.float32, name="x")
    u = ng.placeholder({"D": 4}, np.float32, name="u")
    cost = ng.sum(x * x, out_axes=())
    gu = ng.deriv(cost, u)
    assert gu.axes == u.axes and gu.dtype == np.float32
    (value,) = ng.execute([gu], {x: np.ones((2, 3), np.float32)}, ignore_unused=True)
    np.testing.assert_array_equal(value, np.zeros(4, np.float32))
    with pytest.raises(ng.OpError, match="scalar cost"):
        ng.deriv(x, x)


# -- composite graphs: an MLP layer with batchnorm -------------------------------------------
EPS = 1e-3


def _mlp_inputs(c=3, d=4, n=5):
    axes = {k: ng.make_axis(v, k) for k, v in (("C", c), ("D", d), ("N", n))}
    shapes = {"x": ("D", "N"), "w": ("C", "D"), "gamma": ("C",), "beta": ("C",)}
    ph = {k: ng.placeholder([axes[a] for a in s], np.float64, name=k) for k, s in shapes.items()}
    rng = np.random.default_rng(7)
    feeds = {p: rng.normal(size=p.axes.lengths) for p in ph.values()}
    return ph, feeds, axes["C"]


def primitive_batchnorm(h, gamma, beta, c):
    mu = ng.mean(h, out_axes=[c])
    var = ng.variance(h, out_axes=[c])
    xhat = (h - mu) * ng.reciprocal(ng.sqrt(var + EPS))
    return gamma * xhat + beta, mu, var


def _layer(ph, c, fused: bool):
    h = ng.dot(ph["w"], ph["x"])
    if fused:
        y, mu, var = ng.batchnorm_fprop(h, ph["gamma"], ph["beta"], eps=EPS)
    else:
        y, mu, var = primitive_batchnorm(h, ph["gamma"], ph["beta"], c)
    return ng.tanh(y), mu, var


def test_primitive_batchnorm_mlp_gradients_match_finite_differences():
    ph, feeds, c = _mlp_inputs()
    y, _, _ = _layer(ph, c, fused=False)
    cost = weighted_cost([y], seed=3)
    program = ng.compile_graph([cost])
    for p in ph.values():
        (grad,) = ng.execute([ng.deriv(cost, p)], feeds)
        fd = central_difference(lambda v, p=p: program.run({**feeds, p: v})[0].item(), feeds[p])
        np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7, err_msg=p.name)


@pytest.mark.parametrize("with_stats", [False, True], ids=["y", "y-mean-var"])
def test_fused_batchnorm_gradient_equals_the_primitive_one(with_stats):
    ph, feeds, c = _mlp_inputs()
    costs = []
    for fused in (False, True):
        y, mu, var = _layer(ph, c, fused)
        costs.append(weighted_cost([y, mu, var] if with_stats else [y], seed=4))
    prim, fused = (ng.execute([ng.deriv(k, p) for p in ph.values()], feeds) for k in costs)
    for p, a, b in zip(ph.values(), prim, fused):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12, err_msg=p.name)
    np.testing.assert_allclose(*(ng.execute([k], feeds)[0] for k in costs), rtol=1e-12)
    check_gradients(costs[1], feeds, seed=5)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.bool_])
def test_cast_gradient_is_the_adjoint_cast_back(dtype):
    """Through a float cast the adjoint comes back (a wide central difference agrees, as the
    cast is linear); through an integer or bool cast none flows (zero)."""
    x = ng.placeholder({"A": 3, "B": 2}, np.float64, name="x")
    w = np.random.default_rng(4).normal(size=(3, 2))
    cost = ng.sum(ng.cast(ng.cast(x, dtype), np.float64) * ng.constant(w, x.axes, np.float64))
    xv = np.random.default_rng(5).uniform(0.2, 0.8, size=(3, 2))
    (grad,) = ng.execute([ng.deriv(cost, x)], {x: xv}, ignore_unused=True)
    if np.dtype(dtype).kind == "f":
        program = ng.compile_graph([cost])
        fd = central_difference(lambda v: program.run({x: v})[0].item(), xv, h=0.25)
        np.testing.assert_allclose(grad, w, rtol=float(np.finfo(dtype).eps) * 4)
        np.testing.assert_allclose(fd, w, rtol=2e-2, atol=2e-2)
    else:
        np.testing.assert_array_equal(grad, np.zeros((3, 2)))
