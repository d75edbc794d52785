"""Slicing, padding and axes ops in ngraph's front-end signatures: tensor_slice and `x[...]`,
pad, expand_dims, cast_axes, concat_along_axis -- against numpy, gradients against differences."""

import numpy as np
import pytest
from helpers import central_difference

import ngrules as ng

A, B, C = ng.Axis("A", 4), ng.Axis("B", 5), ng.Axis("C", 3)
XV = np.random.default_rng(3).normal(size=(4, 5))


def _x():
    return ng.placeholder([A, B], np.float64, name="x")


def _check_grad(y, x, xv, others=None):
    w = np.random.default_rng(1).normal(size=y.axes.lengths)
    cost = ng.sum(y * ng.constant(w, y.axes, np.float64), out_axes=())
    feeds = {**(others or {}), x: xv}
    (grad,) = ng.execute([ng.deriv(cost, x)], feeds, ignore_unused=True)
    program = ng.compile_graph([cost])
    fd = central_difference(lambda v: program.run({**feeds, x: v})[0].item(), xv)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "item",
    [(1,), (slice(1, 3),), (slice(None), slice(0, 5, 2)), (-1, slice(1, None)), (2, 3),
     (slice(None, None, 3), 4)],
)  # fmt: skip
def test_getitem_is_numpy_indexing_and_keeps_axis_names(item):
    x = _x()
    y = x[item]
    want = XV[item]
    assert y.axes.lengths == want.shape
    kept = [a.name for a, i in zip([A, B], item + (slice(None),)) if not isinstance(i, int)]
    assert list(y.axes.names) == kept
    (got,) = ng.execute([y], {x: XV})
    np.testing.assert_array_equal(got, want)
    _check_grad(y, x, XV)


def test_tensor_slice_whole_is_identity_and_errors_are_reported():
    x = _x()
    assert ng.tensor_slice(x, [slice(None), slice(None)]) is x
    assert x[1, 2].axes == ng.make_axes(())
    bad_slices = (
        ([0], "one slice per axis"),
        ([9, 0], "out of range"),
        ([slice(None, None, -1), 0], "positive"),
        ([slice(2, 2), 0], "empty"),
    )
    for bad, message in bad_slices:
        with pytest.raises(ng.OpError, match=message):
            ng.tensor_slice(x, bad)
    named = ng.tensor_slice(x, [slice(0, 2), 0], axes=[ng.Axis("M", 2)])
    assert named.axes.names == ("M",)


def test_slice_along_axis_drops_the_axis():
    x = _x()
    (got,) = ng.execute([ng.slice_along_axis(x, B, 2)], {x: XV})
    np.testing.assert_array_equal(got, XV[:, 2])


def test_pad_adds_zeros_and_its_gradient_slices_back():
    x = _x()
    y = ng.pad(x, [1, (0, 2)])
    assert y.axes.names == ("A", "B") and y.axes.lengths == (6, 7)
    (got,) = ng.execute([y], {x: XV})
    np.testing.assert_array_equal(got, np.pad(XV, [(1, 1), (0, 2)]))
    assert ng.pad(x, [0, 0]) is x
    _check_grad(y, x, XV)


def test_expand_dims_inserts_a_repeated_axis():
    x = _x()
    y = ng.expand_dims(x, C, 1)
    assert y.axes == ng.make_axes([A, C, B])
    (got,) = ng.execute([y], {x: XV})
    np.testing.assert_array_equal(got, np.repeat(XV[:, None, :], 3, axis=1))
    assert ng.expand_dims(x, A, 0) is x
    _check_grad(y, x, XV)


def test_cast_axes_renames_without_changing_values():
    x = _x()
    m, n = ng.Axis("M", 4), ng.Axis("N", 5)
    y = ng.cast_axes(x, [m, n])
    assert y.axes == ng.make_axes([m, n])
    (got,) = ng.execute([y], {x: XV})
    np.testing.assert_array_equal(got, XV)
    with pytest.raises(ng.OpError, match="lengths"):
        ng.cast_axes(x, [n, m])
    _check_grad(y, x, XV)


def test_concat_along_axis_in_ngraph_signature_reorders_to_the_first():
    x = _x()
    y = ng.placeholder([B, ng.Axis("A", 2)], np.float64, name="y")
    yv = np.random.default_rng(4).normal(size=(5, 2))
    z = ng.concat_along_axis([x, y], A)
    assert z.axes.names == ("A", "B") and z.axes.lengths == (6, 5)
    (got,) = ng.execute([z], {x: XV, y: yv})
    np.testing.assert_array_equal(got, np.concatenate([XV, yv.T], axis=0))
    _check_grad(z, x, XV, {y: yv})
    _check_grad(z, y, yv, {x: XV})
