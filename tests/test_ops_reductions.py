"""Reductions added for issue 12: Prod's gradient at zeros, Argmax/Argmin, and `max`/`min` in
rules resolving to the reductions when given a node."""

import numpy as np
import pytest
from helpers import central_difference
from hypothesis import given
from hypothesis import strategies as st

import ngrules as ng
from ngrules.lang.functions import FUNCTIONS


def _prod_grad(values):
    x = ng.placeholder({"A": len(values)}, np.float64, name="x")
    (grad,) = ng.execute([ng.deriv(ng.prod(x, out_axes=()), x)], {x: np.array(values, float)})
    return grad


@pytest.mark.parametrize(
    "values, want",
    [((0, 2, 3), (6, 0, 0)), ((0, 0, 3), (0, 0, 0)), ((1, 2, 3), (6, 3, 2)), ((0,), (1,))],
)
def test_prod_gradient_is_exact_at_zeros_as_ngraph_computes_it(values, want):
    grad = _prod_grad(values)
    assert not np.isnan(grad).any()
    np.testing.assert_array_equal(grad, np.array(want, float))


@given(st.data())
def test_prod_gradient_matches_finite_differences_with_zeros(data):
    """Prod is a polynomial, so central differences are exact enough even at zeros."""
    shape = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4)))
    values = data.draw(
        st.lists(st.sampled_from([0.0, -1.5, 0.5, 1.0, 2.0]), min_size=6, max_size=6)
    )
    xv = np.resize(np.array(values), shape)
    x = ng.placeholder(ng.make_axes({"A": shape[0], "B": shape[1]}), np.float64, name="x")
    cost = ng.sum(
        ng.prod(x, reduction_axes=x.axes[1:])
        * ng.constant(np.arange(1.0, shape[0] + 1), x.axes[:1], np.float64),
        out_axes=(),
    )
    (grad,) = ng.execute([ng.deriv(cost, x)], {x: xv}, ignore_unused=True)
    program = ng.compile_graph([cost])
    fd = central_difference(lambda v: program.run({x: v})[0].item(), xv, h=1e-3)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)


def test_prod_domain_includes_zeros():
    assert ng.OPS["Prod"].domain == ("real",)


def test_argmax_argmin_count_over_flattened_reduction_axes():
    rng = np.random.default_rng(0)
    xv = rng.normal(size=(3, 4, 2))
    x = ng.placeholder({"A": 3, "B": 4, "N": 2}, np.float64, name="x")
    red = x.axes[:2]
    hi, lo = ng.argmax(x, reduction_axes=red), ng.argmin(x, reduction_axes=red)
    assert hi.axes == x.axes[2:] and hi.dtype == np.int32
    assert ng.argmax(x, dtype=np.int64).dtype == np.int64
    got_hi, got_lo, default = ng.execute([hi, lo, ng.argmax(x)], {x: xv})
    for n in range(2):
        flat = [xv[i, j, n] for i in range(3) for j in range(4)]
        assert got_hi[n] == flat.index(max(flat)) and got_lo[n] == flat.index(min(flat))
    np.testing.assert_array_equal(default, got_hi)  # default: all but N


def test_argmax_is_not_differentiable_and_refuses_float_dtype():
    x = ng.placeholder({"A": 3}, np.float64, name="x")
    with pytest.raises(ng.OpError, match="integer"):
        ng.argmax(x, dtype=np.float32)
    cost = ng.sum(ng.cast(ng.argmax(x, out_axes=()), np.float64) * x, out_axes=())
    (grad,) = ng.execute([ng.deriv(cost, x)], {x: np.array([1.0, 3.0, 2.0])}, ignore_unused=True)
    np.testing.assert_array_equal(grad, [1.0, 1.0, 1.0])  # no adjoint flows through the cast


def test_max_in_rules_is_the_reduction_for_nodes_and_builtin_for_numbers():
    x = ng.placeholder({"A": 3, "B": 2}, np.float64, name="x")
    red = x.axes[:1]
    assert FUNCTIONS["max"].fn(x, reduction_axes=red) is ng.max(x, reduction_axes=red)
    assert FUNCTIONS["min"].fn(x, reduction_axes=red) is ng.min(x, reduction_axes=red)
    assert FUNCTIONS["max"].fn(2, 5, 3) == 5 and FUNCTIONS["min"].fn((4, 1)) == 1
    assert "reduction_axes" in FUNCTIONS["max"].signature().parameters


def test_max_with_reduction_axes_in_a_rule_builds_the_max_reduction():
    rules = ng.parse_rules(
        """
        rule sum_to_max: s @ Sum(x) => max(x, reduction_axes=s.reduction_axes)
        """
    )
    x = ng.placeholder({"A": 3, "B": 2}, np.float64, name="x")
    result = ng.rewrite([ng.sum(x, reduction_axes=x.axes[:1])], rules)
    (out,) = result.outputs
    assert out.op == "Max" and out.attrs["reduction_axes"] == x.axes[:1]
