"""ngraph parity: pool parameters, scalar promotion, an exact softmax gradient, slice_axis,
squared_L2, tensor_size, initial values, and state (assign, sequential, value_of) run by the
stateful executor; ngraph's pooling and execution tests, ported (our own code, its facts)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import bprop_pool_reference, pool_reference

import ngrules as ng

RNG = np.random.default_rng(23)


# -- pooling: ngraph's pool_params with every key its tests give ---------------------------------
def _pool_params(op="max", window=(1, 2, 2), pad=(0, 0, 0), stride=(1, 1, 1)):
    params = {"op": op, "J": 1, "pad_c": 0, "str_c": 1}
    params.update(zip("TRS", window))
    params.update({f"pad_{a}": p for a, p in zip("dhw", pad)})
    params.update({f"str_{a}": s for a, s in zip("dhw", stride)})
    return params


@pytest.mark.parametrize(
    "shape, op, window, stride",
    [
        ((1, 1, 4, 4, 4), "max", (1, 2, 2), (1, 1, 1)),  # a 2x2 window, stride 1, batch 4
        ((1, 1, 5, 5, 2), "max", (1, 3, 3), (1, 2, 2)),  # 3x3, stride 2
        ((1, 1, 4, 4, 1), "avg", (1, 2, 2), (1, 2, 2)),  # 2x2 average, stride 2
    ],
)
def test_pooling_forward_and_backward_as_ngraph_tests_them(shape, op, window, stride):
    axes = ng.make_axes([ng.make_axis(n, name) for n, name in zip(shape, "CDHWN")])
    x = ng.placeholder(axes, name="x")
    params = _pool_params(op, window, stride=stride)
    y = ng.pooling(params, x)
    delta = ng.placeholder(y.axes, name="delta")
    dx = ng.deriv(ng.sum(y * delta, out_axes=()), x)
    xv = RNG.permutation(np.arange(np.prod(shape))).reshape(shape).astype(np.float32)
    dv = np.full(y.axes.lengths, 4.0, np.float32)  # ngraph's tests send a delta of 4
    got, grad = ng.execute([y, dx], {x: xv, delta: dv})
    attrs = {"mode": op, "window": list(window), "padding": [0, 0, 0], "strides": list(stride)}
    np.testing.assert_allclose(got, pool_reference(xv, attrs))
    np.testing.assert_allclose(grad, bprop_pool_reference(dv, xv, attrs))


def test_a_small_average_pool_by_hand():
    axes = ng.make_axes([ng.make_axis(n, a) for n, a in zip((1, 1, 4, 4, 1), "CDHWN")])
    x = ng.placeholder(axes, name="x")
    y = ng.pooling(_pool_params("avg", (1, 2, 2), stride=(1, 2, 2)), x)
    xv = np.array([[1, 1, 2, 2], [1, 1, 2, 2], [-1, -1, 4, 4], [1, 1, 2, 2]], np.float32)
    (got,) = ng.execute([y], {x: xv.reshape(1, 1, 4, 4, 1)})
    np.testing.assert_array_equal(got.reshape(2, 2), [[1, 2], [0, 3]])


def test_pooling_refuses_what_it_cannot_do_by_name():
    axes = ng.make_axes([ng.make_axis(n, a) for n, a in zip((1, 1, 4, 4, 1), "CDHWN")])
    x = ng.placeholder(axes, name="x")
    with pytest.raises(ng.OpError, match="'max' or 'avg'"):
        ng.pooling(_pool_params("min"), x)
    with pytest.raises(ng.OpError, match="needs 5 axes"):
        ng.pooling(_pool_params(), ng.placeholder(axes[:-1], name="x4"))


# -- Python scalars: promoted as ngraph does, never truncated ---------------------------------
def test_a_float_beside_an_integer_tensor_is_not_truncated():
    a = ng.make_axis(1, "A")
    x = ng.placeholder([a], dtype=np.uint32, name="x")
    y = 0.5 * x * 0.5
    (got,) = ng.execute([y], {x: np.array([1], np.uint32)})
    assert y.dtype == np.float32 and got.tolist() == [0.25]
    assert (x * 2).dtype == np.uint32 and (x + 3).dtype == np.uint32


def test_an_integer_that_does_not_fit_is_refused():
    x = ng.placeholder([ng.make_axis(2, "A")], dtype=np.uint8, name="x")
    with pytest.raises(ng.OpError, match="300 does not fit uint8"):
        x + 300
    with pytest.raises(ng.OpError, match="-1 does not fit uint8"):
        x * -1


# -- softmax: its gradient exact to float rounding --------------------------------------------
def test_the_softmax_gradient_near_a_probability_of_one_is_exact():
    a = ng.make_axis(2, "A")
    x = ng.placeholder([a], name="x")
    (got,) = ng.execute([ng.deriv(ng.softmax(x, [a])[0], x)], {x: np.array([4, -2], np.float32)})
    xv = np.array([4.0, -2.0])
    s = np.exp(xv - xv.max()) / np.exp(xv - xv.max()).sum()
    exact = np.array([s[0] * s[1], -s[0] * s[1]])  # s0 (delta - s0): no cancellation
    np.testing.assert_allclose(got, exact, rtol=2e-7)
    assert abs(got[0] - 0.0024665093) < 1e-10


def test_the_softmax_gradient_matches_finite_differences_with_ties():
    a, n = ng.make_axis(3, "A"), ng.make_axis(2, "N")
    x = ng.placeholder([a, n], name="x", dtype=np.float64)
    w = RNG.normal(size=(3, 2))
    cost = ng.sum(ng.softmax(x, [a]) * ng.constant(w, [a, n], np.float64), out_axes=())
    xv = np.array([[1.0, 0.5], [1.0, -2.0], [0.2, 0.5]])  # ties for the largest in each column
    (grad,) = ng.execute([ng.deriv(cost, x)], {x: xv})

    def f(v):
        e = np.exp(v - v.max(axis=0))
        return float(np.sum(e / e.sum(axis=0) * w))

    numeric = np.zeros_like(xv)
    for i in np.ndindex(xv.shape):
        d = np.zeros_like(xv)
        d[i] = 1e-6
        numeric[i] = (f(xv + d) - f(xv - d)) / 2e-6
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)


# -- slice_axis, squared_L2, tensor_size ------------------------------------------------------
def test_slice_axis_keeps_the_name_with_the_sliced_length():
    c = ng.make_axis(10, "C")
    assert ng.slice_axis(c, slice(2, 7)) == ng.make_axis(5, "C")
    assert ng.slice_axis(c, slice(None, None, -1)).length == 10
    with pytest.raises(ng.OpError, match="empty"):
        ng.slice_axis(c, slice(5, 5))


def test_squared_l2_and_tensor_size_reduce_the_sample_axes_by_default():
    c, h, n = ng.make_axis(3, "C"), ng.make_axis(2, "H"), ng.make_axis(4, "N")
    x = ng.placeholder([c, h, n], name="x")
    xv = RNG.normal(size=(3, 2, 4)).astype(np.float32)
    l2, l2_c, size, size_n = ng.execute(
        [ng.squared_L2(x), ng.squared_L2(x, out_axes=[c]), ng.tensor_size(x),
         ng.tensor_size(x, reduction_axes=[n])], {x: xv})
    np.testing.assert_allclose(l2, (xv**2).sum(axis=(0, 1)), rtol=1e-6)
    np.testing.assert_allclose(l2_c, (xv**2).sum(axis=(1, 2)), rtol=1e-6)
    assert float(size) == 6.0 and float(size_n) == 4.0


# -- variables with initial values; state --------------------------------------------------
def test_a_variable_starts_at_an_array_or_at_a_node_of_constants():
    c = ng.make_axis(5, "C")
    w = RNG.random(5)
    np.testing.assert_allclose(ng.executor(ng.variable([c], initial_value=w))(), w, rtol=1e-6)
    three = ng.make_axis(3, "T")
    y = ng.variable([three], initial_value=ng.constant([3, 4, 5], [three]))
    np.testing.assert_array_equal(ng.executor(y)(), np.array([3, 4, 5], np.float32))
    with pytest.raises(ng.OpError, match="computable from constants"):
        ng.variable([c], initial_value=ng.placeholder([c], name="p"))


def test_sequential_reads_each_node_once_and_assignments_after():
    n = ng.make_axis(1, "N")
    x = ng.variable([n], initial_value=0)
    x0 = x + x
    after = ng.sequential([ng.assign(x, 2), x + x])  # the read after the assignment
    p = ng.sequential([x0, ng.assign(x, 2), x0])  # x0 ran before: it keeps its value
    ex = ng.executor([x0, after, p, x])
    assert [v.tolist() for v in ex()] == [[0], [4], [0], [2]]


def test_sequential_of_reductions_is_its_last_value():
    m = ng.make_axis(3, "M")
    x = ng.variable([m], initial_value=1)
    x0 = x + x
    x1 = ng.sum(x0, out_axes=())
    x2 = ng.sum(x0, out_axes=()) + x0
    p = ng.sequential([x0, x1, x2])
    x0_v, x1_v, x2_v, p_v, x_v = ng.executor([x0, x1, x2, p, x])()
    np.testing.assert_allclose(x0_v, x_v + x_v)
    np.testing.assert_allclose(x1_v, np.sum(x_v + x_v))
    np.testing.assert_allclose(p_v, x2_v)
    np.testing.assert_allclose(x2_v, np.sum(x_v + x_v) + x_v + x_v)


def test_value_of_keeps_the_value_before_the_assignment_and_state_carries_over():
    m = ng.make_axis(3, "M")
    x_np = np.array([1, 2, 3], np.float32)
    x = ng.variable([m], initial_value=x_np)
    x1, x2 = ng.variable([], initial_value=2.0), ng.variable([], initial_value=3.0)
    b = ng.variable([], initial_value=1.0)
    x1_vo, x2_vo = ng.value_of(x1), ng.value_of(x2)
    y = ng.sequential([
        x1_vo,
        x2_vo,
        ng.assign(x1, ng.sum(x, out_axes=()) + x1 * b + (1 - b)),
        ng.assign(x2, ng.mean(x, out_axes=()) + x2 * b + (1 - b)),
        x * 2,
    ])
    state: dict = {}
    main_effect = ng.executor([y, x1_vo, x2_vo, x1, x2], state=state)
    current = ng.executor([x1, x2], state=state)
    want1, want2 = 2.0, 3.0
    for _ in range(2):  # the second run starts from the first run's values
        y_v, x1_init, x2_init, x1_final, x2_final = main_effect()
        np.testing.assert_allclose(y_v, x_np * 2)
        assert (float(x1_init), float(x2_init)) == (want1, want2)
        want1, want2 = x_np.sum() + want1, x_np.mean() + want2
        np.testing.assert_allclose([x1_final, x2_final], [want1, want2], rtol=1e-6)
        np.testing.assert_allclose(current(), [want1, want2], rtol=1e-6)


# -- a training step as one graph, rewritten by rules ------------------------------------------
def _training_step(lr=0.1):
    f, n = ng.make_axis(3, "F"), ng.make_axis(4, "N")
    w0 = np.array([0.5, -0.25, 1.0], np.float32)
    w = ng.variable([f], initial_value=w0, name="w")
    x, t = ng.placeholder([f, n], name="x"), ng.placeholder([n], name="t")
    cost = ng.sum(ng.square(ng.dot(w, x) - t), out_axes=()) * 1.0
    step = ng.sequential([ng.assign(w, w - lr * ng.deriv(cost, w)), cost])
    return w, x, t, step, w0


def _numpy_training(w, xv, tv, steps, lr=0.1):
    losses = []
    for _ in range(steps):
        r = w @ xv - tv
        losses.append(float(np.sum(r * r)))
        w = w - lr * 2 * (xv @ r)
    return w, losses


def test_a_training_step_runs_as_one_graph_and_rules_apply_to_it():
    w, x, t, step, w0 = _training_step()
    xv = RNG.normal(size=(3, 4)).astype(np.float32) * 0.3
    tv = RNG.normal(size=4).astype(np.float32)
    want_w, want_losses = _numpy_training(w0.astype(np.float64), xv, tv, steps=3)
    res = ng.rewrite([step], ng.load_library(), pipeline="cpu")
    assert res.stop == "fixpoint" and "mul_one" in res.fired()
    ops = {node.op for node in ng.toposort(res.outputs)}
    assert "Dot" not in ops and {"Assign", "Sequential"} <= ops
    for outputs in ([step], res.outputs):
        run = ng.executor([*outputs, w], x, t)
        losses = [float(run(xv, tv)[0]) for _ in range(3)]
        np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
        np.testing.assert_allclose(run.state[w], want_w, rtol=1e-5)


def test_a_stateless_execute_starts_from_the_initial_values_every_time():
    w, x, t, step, w0 = _training_step()
    feeds = {x: np.ones((3, 4), np.float32), t: np.zeros(4, np.float32)}
    first = ng.execute([step], feeds)[0]
    assert ng.execute([step], feeds)[0] == first


def test_assign_checks_its_target_and_the_executor_its_arguments():
    a = ng.make_axis(2, "A")
    with pytest.raises(ng.OpError, match="variable to assign to"):
        ng.assign(ng.placeholder([a], name="p"), 1.0)
    run = ng.executor(ng.variable([a]), ng.placeholder([a], name="q"))
    with pytest.raises(ng.ExecutionError, match="takes 1 value"):
        run()
