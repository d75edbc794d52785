"""The ngraph-style front end: broadcasting rule, numbers, reductions, flattening, dot."""

import numpy as np
import pytest
from helpers import axes_st, broadcast_named, einsum_dot, permute, reduce_named
from hypothesis import given
from hypothesis import strategies as st

import ngrules as ng


def _feed(*nodes, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.uniform(0.5, 2.0, n.axes.lengths).astype(n.dtype) for n in nodes}


@given(axes_st(), axes_st())
def test_elementwise_broadcasting_rule(xa, ya):
    x = ng.placeholder(xa, np.float64, name="x")
    y = ng.placeholder(ya, np.float64, name="y")
    out = x * y
    want = ya if ya.is_super_set(xa) else xa + (ya - xa)
    assert out.axes == want
    assert out.op == "Multiply" and all(a.axes == want for a in out.args)
    feeds = _feed(x, y)
    (got,) = ng.execute([out], feeds)
    ref = broadcast_named(feeds[x], xa, want) * broadcast_named(feeds[y], ya, want)
    np.testing.assert_allclose(got, ref, rtol=1e-12)


@pytest.mark.parametrize(
    "build, reference",
    [
        (lambda x: x * 1.0 + 0.0, lambda v: v),
        (lambda x: 2 - x, lambda v: 2 - v),
        (lambda x: 1 / x, lambda v: 1 / v),
        (lambda x: 3 * x, lambda v: 3 * v),
        (lambda x: x / 4 - 1, lambda v: v / 4 - 1),
        (lambda x: -x + np.float64(0.5), lambda v: 0.5 - v),
        (lambda x: ng.maximum(x, 1.0), lambda v: np.maximum(v, 1.0)),
        (lambda x: ng.minimum(1.0, x), lambda v: np.minimum(v, 1.0)),
    ],
    ids=[
        "times-one-plus-zero",
        "rsub",
        "rdiv",
        "rmul",
        "div-sub",
        "neg-npfloat",
        "maximum",
        "minimum",
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_numbers_mix_with_nodes(build, reference, dtype):
    x = ng.placeholder({"C": 3, "N": 2}, dtype, name="x")
    out = build(x)
    assert out.axes == x.axes and out.dtype == x.dtype
    feeds = _feed(x)
    (got,) = ng.execute([out], feeds)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, reference(feeds[x]), rtol=1e-6)


def test_a_number_cannot_combine_with_a_non_number():
    x = ng.placeholder({"C": 3}, name="x")
    with pytest.raises(ng.OpError, match="cannot combine"):
        x + "1"
    with pytest.raises(ng.OpError, match="at least one node"):
        ng.add(1.0, 2.0)


CHW = ng.make_axes({"C": 2, "H": 3, "N": 4})


@pytest.mark.parametrize(
    "kwargs, out_names",
    [
        ({"reduction_axes": CHW[1:2]}, ("C", "N")),
        ({"out_axes": CHW[::2]}, ("C", "N")),
        ({"out_axes": ng.make_axes([CHW[2], CHW[0]])}, ("N", "C")),
        ({"reduction_axes": CHW[:1], "out_axes": ng.make_axes([CHW[2], CHW[1]])}, ("N", "H")),
        ({}, ("N",)),
        ({"out_axes": ()}, ()),
        ({"reduction_axes": ()}, ("C", "H", "N")),
    ],
    ids=["reduction", "out", "out-reordered", "both", "default-keeps-N", "scalar", "nothing"],
)
@pytest.mark.parametrize("fn", ["sum", "mean", "variance", "max", "min", "prod"])
def test_reductions_follow_ngraph(kwargs, out_names, fn):
    x = ng.placeholder(CHW, np.float64, name="x")
    out = getattr(ng, fn)(x, **kwargs)
    assert out.axes.names == out_names
    if out_names and list(out_names) != [n for n in CHW.names if n in out_names]:
        assert out.op == "ReorderAxes" or out.args[0].op == "ReorderAxes"
    feeds = _feed(x)
    (got,) = ng.execute([out], feeds)
    red = CHW - ng.make_axes([a for a in CHW if a.name in out_names])
    np.testing.assert_allclose(got, _reference_reduce(fn, feeds[x], red, out.axes), rtol=1e-12)


def _reference_reduce(fn, value, red, out_axes):
    def variance(v, axis):
        return np.mean((v - v.mean(axis=axis, keepdims=True)) ** 2, axis=axis)

    np_fn = {
        "sum": np.sum,
        "mean": np.mean,
        "variance": variance,
        "max": np.max,
        "min": np.min,
        "prod": np.prod,
    }[fn]
    kept = reduce_named(np_fn, value, CHW, red)
    return permute(kept, CHW - red, out_axes)


def test_mean_is_a_divide_and_variance_is_biased():
    x = ng.placeholder(CHW, np.float64, name="x")
    assert ng.mean(x, out_axes=CHW[:1]).op == "Divide"
    feeds = _feed(x)
    (var,) = ng.execute([ng.variance(x, out_axes=CHW[:1])], feeds)
    np.testing.assert_allclose(var, feeds[x].reshape(2, -1).var(axis=1, ddof=0), rtol=1e-12)
    assert not np.allclose(var, feeds[x].reshape(2, -1).var(axis=1, ddof=1))


def test_conflicting_reduction_and_out_axes_raise():
    x = ng.placeholder(CHW, name="x")
    with pytest.raises(ng.OpError, match="must split"):
        ng.sum(x, reduction_axes=CHW[:2], out_axes=CHW[1:])


@pytest.mark.parametrize(
    "idx, names",
    [(0, ("C*H*N",)), (1, ("C", "H*N")), (2, ("C*H", "N")), (3, ("C*H*N",))],
    ids=["zero", "one", "two", "all"],
)
def test_flatten_at_follows_ngraph(idx, names):
    x = ng.placeholder(CHW, name="x")
    flat = ng.flatten_at(x, idx)
    assert flat.axes.names == names
    assert flat.axes.size == CHW.size
    assert ng.unflatten(flat).axes == CHW
    feeds = _feed(x)
    got, back = ng.execute([flat, ng.unflatten(flat)], feeds)
    np.testing.assert_array_equal(got, feeds[x].reshape(flat.axes.lengths))
    np.testing.assert_array_equal(back, feeds[x])


def test_flatten_and_unflatten_identities():
    x = ng.placeholder(CHW, name="x")
    one = ng.placeholder({"C": 3}, name="one")
    assert ng.flatten(one) is one
    assert ng.flatten(x, CHW) is x
    assert ng.unflatten(x) is x
    flat = ng.flatten(x)
    assert ng.flatten(flat) is flat
    forced = ng.flatten(one, [[one.axes[0]]])
    assert forced is not one and forced.axes.lengths == (3,)


@given(axes_st(max_size=4), axes_st(max_size=4))
def test_dot_axis_rule(xa, ya):
    x = ng.placeholder(xa, np.float64, name="x")
    y = ng.placeholder(ya, np.float64, name="y")
    out = ng.dot(x, y)
    red = xa & ya
    assert out.axes == (xa - red) + (ya - red)
    assert ng.OPS["Dot"].derived["reduction_axes"](out) == red
    feeds = _feed(x, y)
    (got,) = ng.execute([out], feeds)
    np.testing.assert_allclose(got, einsum_dot(feeds[x], feeds[y], xa, ya), rtol=1e-10)


@given(axes_st(), st.data())
def test_broadcast_and_axes_with_order(axes, data):
    x = ng.placeholder(axes, name="x")
    assert ng.broadcast(x, axes) is x
    assert ng.axes_with_order(x, axes) is x
    order = ng.make_axes(data.draw(st.permutations(list(axes))))
    reordered = ng.axes_with_order(x, order)
    assert reordered.axes == order
    assert (reordered is x) == (order == axes)
    extra = ng.make_axes({"Z": 2})
    wide = ng.broadcast(x, extra + order)
    assert wide.op == "Broadcast" and wide.axes == extra + order
    feeds = _feed(x)
    got_r, got_w = ng.execute([reordered, wide], feeds)
    np.testing.assert_array_equal(got_r, permute(feeds[x], axes, order))
    np.testing.assert_array_equal(got_w, broadcast_named(feeds[x], axes, extra + order))


def test_constant_forms():
    c = ng.make_axes({"C": 3})
    scalar = ng.constant(2.0, c)
    assert scalar.op == "Broadcast" and scalar.args[0].op == "Constant"
    array = ng.constant(np.arange(3.0), c, dtype=np.float64)
    assert array.op == "Constant" and array.dtype == np.float64
    got = ng.execute([scalar, array])
    np.testing.assert_array_equal(got[0], [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(got[1], [0.0, 1.0, 2.0])
    with pytest.raises(ng.OpError, match="does not fit"):
        ng.constant(np.arange(3.0), ng.make_axes({"C": 4}))


def test_variable_is_filled_or_fed():
    v = ng.variable({"C": 2}, np.float64, name="v", initial=1.5)
    (filled,) = ng.execute([v * 2.0])
    np.testing.assert_array_equal(filled, [3.0, 3.0])
    (fed,) = ng.execute([v * 2.0], {"v": np.array([1.0, 2.0])})
    np.testing.assert_array_equal(fed, [2.0, 4.0])
