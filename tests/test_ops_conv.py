"""Convolution and pooling through the front end, in ngraph's signatures and named layouts."""

import numpy as np
import pytest
from helpers import bprop_pool_reference, central_difference, conv_reference, pool_reference

import ngrules as ng

RNG = np.random.default_rng(11)


def _axes(names, lengths):
    return ng.make_axes([ng.Axis(n, k) for n, k in zip(names, lengths)])


def _fd_check(cost, p, feeds):
    (grad,) = ng.execute([ng.deriv(cost, p)], feeds, ignore_unused=True)
    program = ng.compile_graph([cost])
    fd = central_difference(lambda v: program.run({**feeds, p: v})[0].item(), feeds[p])
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


def test_convolution_with_padding_strides_dilation_matches_direct_loops():
    x = ng.placeholder(_axes("CDHWN", (2, 1, 5, 6, 2)), np.float64, name="x")
    w = ng.placeholder(_axes("CTRSK", (2, 1, 3, 2, 3)), np.float64, name="w")
    params = {"pad_h": 1, "pad_w": 0, "str_h": 2, "str_w": 1, "dil_w": 2}
    y = ng.convolution(params, x, w)
    assert y.axes.names == ("K", "M", "P", "Q", "N") and y.axes.lengths == (3, 1, 3, 4, 2)
    xv, wv = RNG.normal(size=x.axes.lengths), RNG.normal(size=w.axes.lengths)
    (got,) = ng.execute([y], {x: xv, w: wv})
    attrs = {"padding": [0, 1, 0], "strides": [1, 2, 1], "dilation": [1, 1, 2]}
    np.testing.assert_allclose(got, conv_reference(xv, wv, attrs), rtol=1e-12)
    cost = ng.sum(y * ng.constant(RNG.normal(size=y.axes.lengths), y.axes, np.float64), out_axes=())
    _fd_check(cost, x, {x: xv, w: wv})
    _fd_check(cost, w, {x: xv, w: wv})


def test_convolution_checks_layouts_and_parameters():
    x = ng.placeholder(_axes("CDHWN", (2, 1, 3, 3, 1)), name="x")
    with pytest.raises(ng.OpError, match="channel"):
        ng.convolution({}, x, ng.placeholder(_axes("ETRSK", (2, 1, 1, 1, 1)), name="w"))
    with pytest.raises(ng.OpError, match="unknown parameters"):
        ng.convolution({"pad_x": 1}, x, ng.placeholder(_axes("CTRSK", (2, 1, 1, 1, 1))))
    with pytest.raises(ng.OpError, match="does not fit"):
        ng.convolution({}, x, ng.placeholder(_axes("CTRSK", (2, 1, 5, 1, 1))))


@pytest.mark.parametrize("mode", ["max", "avg"])
def test_pooling_matches_direct_loops_and_routes_gradients(mode):
    x = ng.placeholder(_axes("CDHWN", (2, 1, 4, 5, 2)), np.float64, name="x")
    params = {"op": mode, "R": 2, "S": 3, "str_h": 2, "str_w": 1, "pad_w": 1}
    y = ng.pooling(params, x)
    assert y.axes.names == ("C", "M", "P", "Q", "N") and y.axes.lengths == (2, 1, 2, 5, 2)
    xv = RNG.normal(size=x.axes.lengths)
    (got,) = ng.execute([y], {x: xv})
    attrs = {"mode": mode, "window": [1, 2, 3], "padding": [0, 0, 1], "strides": [1, 2, 1]}
    np.testing.assert_allclose(got, pool_reference(xv, attrs), rtol=1e-12)
    weights = RNG.normal(size=y.axes.lengths)
    cost = ng.sum(y * ng.constant(weights, y.axes, np.float64), out_axes=())
    (grad,) = ng.execute([ng.deriv(cost, x)], {x: xv}, ignore_unused=True)
    np.testing.assert_allclose(grad, bprop_pool_reference(weights, xv, attrs), rtol=1e-12)
    _fd_check(cost, x, {x: xv})


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32])
def test_max_pooling_pads_booleans_and_integers_with_their_lowest_value(dtype):
    x = ng.placeholder(_axes("CDHWN", (1, 1, 3, 4, 2)), dtype, name="x")
    params = {"op": "max", "R": 2, "S": 2, "pad_h": 1, "pad_w": 1}
    xv = RNG.integers(0, 2, size=x.axes.lengths).astype(dtype)
    (got,) = ng.execute([ng.pooling(params, x)], {x: xv})
    attrs = {"mode": "max", "window": [1, 2, 2], "padding": [0, 1, 1], "strides": [1, 1, 1]}
    want = pool_reference(xv.astype(np.float64), attrs)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.astype(np.float64), want)


def test_pooling_refuses_channel_pooling_and_unknown_modes():
    x = ng.placeholder(_axes("CDHWN", (2, 1, 3, 3, 1)), name="x")
    for channel in ({"J": 2}, {"pad_c": 1}, {"str_c": 2}):
        with pytest.raises(ng.OpError, match="pooling across channels is not supported"):
            ng.pooling(channel, x)
    with pytest.raises(ng.OpError, match="'max' or 'avg'"):
        ng.pooling({"op": "min"}, x)


@pytest.mark.parametrize("op", ["Pooling", "BpropPool"])
def test_pooling_padding_of_the_wrong_length_is_an_op_error(op):
    """Not numpy's broadcasting ValueError: a graph file or a rule may give any padding."""
    x = ng.placeholder(_axes("CDHWN", (2, 1, 3, 3, 1)), name="x")
    args = (x,) if op == "Pooling" else (x, x)
    with pytest.raises(ng.OpError, match=r"padding needs 3 values .* got \[0, 0\]"):
        ng.make_node(op, args, padding=np.array([0, 0]), axes=x.axes)
