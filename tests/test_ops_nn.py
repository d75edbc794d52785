"""Network ops and front-end composites: sigmoid, softmax, cross-entropy (ngraph's plain and
optimised forms), one_hot -- each against a numpy formula, gradients against differences."""

import math
import warnings

import numpy as np
import pytest
from helpers import central_difference

import ngrules as ng
from ngrules.ir import layers

RNG = np.random.default_rng(7)


def _ph(lengths, name):
    return ng.placeholder(ng.make_axes(lengths), np.float64, name=name)


def _grad_vs_fd(cost, x, feeds, rtol=1e-6, atol=1e-8):
    (grad,) = ng.execute([ng.deriv(cost, x)], feeds, ignore_unused=True)
    program = ng.compile_graph([cost])
    fd = central_difference(lambda v: program.run({**feeds, x: v})[0].item(), feeds[x])
    np.testing.assert_allclose(grad, fd, rtol=rtol, atol=atol)


def test_sigmoid_is_exact_and_does_not_overflow():
    x = _ph({"A": 5}, "x")
    xv = np.array([-800.0, -3.0, 0.0, 2.5, 800.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (got,) = ng.execute([ng.sigmoid(x)], {x: xv})
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(got, 1.0 / (1.0 + np.exp(-xv)), rtol=1e-15, atol=1e-300)
    assert ng.sigmoid(ng.placeholder({"A": 2}, np.float16)).dtype == np.float16


def test_softmax_normalises_all_but_the_batch_axis_by_default():
    x = _ph({"C": 4, "N": 3}, "x")
    xv = RNG.normal(size=(4, 3)) * 30  # large values: the max is subtracted first
    s = ng.softmax(x)
    assert s.attrs["normalization_axes"] == x.axes[:1]
    (got,) = ng.execute([s], {x: xv})
    e = np.exp(xv - xv.max(axis=0))
    np.testing.assert_allclose(got, e / e.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(got.sum(axis=0), np.ones(3), rtol=1e-12)


def test_cross_entropy_multi_plain_and_softmax_forms_agree_with_numpy():
    x, t = _ph({"C": 4, "N": 3}, "x"), _ph({"C": 4, "N": 3}, "t")
    xv = RNG.normal(size=(4, 3))
    tv = np.eye(4)[:, [0, 2, 3]]
    y = ng.softmax(x)
    fast = ng.cross_entropy_multi(y, t)
    plain = ng.cross_entropy_multi(y, t, enable_softmax_opt=False)
    bits = ng.cross_entropy_multi(y, t, usebits=True)
    assert fast.axes == x.axes[1:] and "Softmax" not in {n.op for n in ng.toposort([fast])}
    got_fast, got_plain, got_bits = ng.execute([fast, plain, bits], {x: xv, t: tv})
    p = np.exp(xv) / np.exp(xv).sum(axis=0)
    want = -(np.log(p) * tv).sum(axis=0)
    np.testing.assert_allclose(got_fast, want, rtol=1e-10)
    np.testing.assert_allclose(got_plain, want, rtol=1e-10)
    np.testing.assert_allclose(got_bits, want / np.log(2.0), rtol=1e-10)
    for cost in (fast, plain):
        _grad_vs_fd(ng.sum(cost, out_axes=()), x, {x: xv, t: tv})


def test_cross_entropy_binary_plain_and_sigmoid_forms_agree_with_numpy():
    x, t = _ph({"A": 3, "N": 2}, "x"), _ph({"A": 3, "N": 2}, "t")
    xv, tv = RNG.normal(size=(3, 2)), RNG.uniform(size=(3, 2))
    y = ng.sigmoid(x)
    fast = ng.cross_entropy_binary(y, t)
    plain = ng.cross_entropy_binary(y, t, enable_sig_opt=False)
    inner = ng.cross_entropy_binary_inner(y, t)
    assert fast.axes == x.axes[1:] and inner.axes == x.axes
    got_fast, got_plain = ng.execute([fast, plain], {x: xv, t: tv})
    p = 1.0 / (1.0 + np.exp(-xv))
    want = -(np.log(p) * tv + np.log(1 - p) * (1 - tv)).sum(axis=0)
    np.testing.assert_allclose(got_fast, want, rtol=1e-10)
    np.testing.assert_allclose(got_plain, want, rtol=1e-10)
    for cost in (fast, plain):
        _grad_vs_fd(ng.sum(cost, out_axes=()), x, {x: xv, t: tv})


def test_cross_entropy_rejects_axes_that_do_not_broadcast():
    with pytest.raises(ng.OpError, match="must broadcast"):
        ng.cross_entropy_multi(_ph({"A": 2}, "a"), _ph({"B": 2}, "b"))


def test_safelog_is_finite_at_zero():
    x = _ph({"A": 2}, "x")
    (got,) = ng.execute([ng.safelog(x)], {x: np.array([0.0, np.e])})
    np.testing.assert_allclose(got, [-50.0, 1.0], rtol=1e-12)


def test_one_hot_puts_the_class_axis_first():
    idx = ng.placeholder({"N": 4}, np.int32, name="idx")
    k = ng.make_axis(3, "K")
    hot = ng.one_hot(idx, k)
    assert hot.axes == ng.make_axes([k]) + idx.axes and hot.dtype == np.float32
    (got,) = ng.execute([hot], {idx: np.array([2, 0, 1, 5], np.int32)})
    want = np.zeros((3, 4), np.float32)
    want[2, 0] = want[0, 1] = want[1, 2] = 1
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ng.OpError, match="integers"):
        ng.one_hot(ng.placeholder({"N": 4}), k)


def test_erf_and_exact_gelu():
    x = _ph({"A": 5}, "x")
    xv = np.array([-3.0, -0.5, 0.0, 0.7, 2.5])
    got, gelu = ng.execute([ng.erf(x), layers.gelu_erf(x)], {x: xv})
    np.testing.assert_allclose(got, [math.erf(v) for v in xv], rtol=1e-15, atol=1e-16)
    want = 0.5 * xv * (1 + np.array([math.erf(v / math.sqrt(2)) for v in xv]))
    np.testing.assert_allclose(gelu, want, rtol=1e-14)
    _grad_vs_fd(ng.sum(layers.gelu_erf(x), out_axes=()), x, {x: xv})
    with pytest.raises(ng.OpError, match="float"):
        ng.erf(ng.placeholder({"A": 2}, np.int32))
