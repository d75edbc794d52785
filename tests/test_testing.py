"""ngrules.testing: public strategies for users' property tests, and check_rewrite."""

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

import ngrules as ng
from ngrules.verification import testing

QUIET = settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)


@QUIET
@given(testing.axes(min_rank=1, max_rank=4))
def test_axes_have_distinct_names_and_lengths_one_to_five(axes):
    assert 1 <= len(axes) <= 4
    assert len(set(axes.names)) == len(axes)
    assert all(1 <= n <= 5 for n in axes.lengths)


def _with_values(axes):
    return testing.tensors(axes, domain="nonzero").map(lambda value: (axes, value))


@QUIET
@given(testing.axes().flatmap(_with_values))
def test_tensors_fit_their_axes_and_domain(pair):
    axes, value = pair
    assert value.shape == axes.lengths and value.dtype == np.float64
    assert (np.abs(value) >= 0.5).all()


@QUIET
@given(testing.graphs())
def test_random_graphs_are_valid_and_run(graph):
    ng.validate(graph.outputs)
    with np.errstate(all="ignore"):  # a random Divide may meet a zero it made itself
        (value,) = ng.execute(graph.outputs, graph.feeds)
    assert value.shape == graph.outputs[0].axes.lengths


@QUIET
@given(testing.graphs(ops=["Add", "Sum", "Dot"], max_depth=2, dtype=np.float32))
def test_random_graphs_use_the_ops_asked_for(graph):
    ops = {n.op for n in ng.toposort(graph.outputs)}
    assert ops <= {"Add", "Sum", "Dot", "Placeholder"}
    assert graph.outputs[0].dtype == np.float32


RULES = ng.parse_rules("rule mul_one: x * 1 => x", "user.rules")


@QUIET
@given(testing.instances(RULES.rule("mul_one")))
def test_instances_of_a_rule_check_out(inst):
    testing.check_rewrite(inst.outputs, inst.after, inst.feeds)


def test_check_rewrite_reports_a_wrong_rewrite_readably():
    x = ng.placeholder([ng.make_axis(3, "A")], name="x")
    with pytest.raises(AssertionError) as err:
        testing.check_rewrite([x * 2.0], [x])
    text = str(err.value)
    assert "the rewrite changes results" in text
    assert "x [A:3] = " in text and "results differ" in text and "at A=" in text


def test_check_rewrite_accepts_a_right_rewrite_and_given_feeds():
    x = ng.placeholder([ng.make_axis(2, "A")], name="x")
    testing.check_rewrite([ng.log(ng.exp(x))], [x])
    testing.check_rewrite([x + 0.0], [x], {x: np.array([1.0, -1.0], np.float32)})


def test_check_rewrite_judges_inputs_the_graph_cannot_take_strictly_or_by_refinement():
    """log(-1) is NaN before, -1 after: a difference under strict semantics (the default),
    not under refinement (a rewrite may define an undefined result)."""
    x = ng.placeholder([ng.make_axis(2, "A")], name="x")
    feeds = {x: np.array([-1.0, 1.0], np.float32)}
    with pytest.raises(AssertionError, match="results differ"):
        testing.check_rewrite([ng.log(x)], [ng.log(ng.absolute(x))], feeds)
    testing.check_rewrite([ng.log(x)], [ng.log(ng.absolute(x))], feeds, semantics="refine")


def test_check_rewrite_fails_where_after_is_not_finite_and_before_is():
    """Softmax without its max: NaN after at x = 1000 where the softmax is [1, 0, 0]."""
    a = ng.make_axis(3, "A")
    x = ng.placeholder([a], name="x", dtype=np.float64)
    e = ng.exp(x)
    naive = e / ng.broadcast(ng.sum(e, out_axes=()), [a])
    feeds = {x: np.array([1000.0, 0.0, -1.0])}
    with pytest.raises(AssertionError, match="after nan"):
        testing.check_rewrite([ng.softmax(x, normalization_axes=[a])], [naive], feeds)
    with pytest.raises(AssertionError, match="results differ"):  # refinement: before is finite
        testing.check_rewrite([ng.softmax(x, normalization_axes=[a])], [naive], feeds,
                              semantics="refine")
    testing.check_rewrite([ng.softmax(x, normalization_axes=[a])], [naive], feeds,
                          floats="reals")  # over the reals: the overflow is float's, not the rule's


SQRT = ng.parse_rules("rule sqrt_as_exp: Sqrt(x) => Exp(0.5 * Log(x))", "user.rules")


def _left_finite(inst) -> bool:
    with np.errstate(all="ignore"):
        return all(np.isfinite(v).all() for v in ng.execute(inst.outputs, inst.feeds))


@settings(QUIET, max_examples=20)
@given(testing.instances(SQRT.rule("sqrt_as_exp")))
def test_instances_have_a_finite_left_side_so_the_documented_pattern_holds(inst):
    assert _left_finite(inst)
    testing.check_rewrite(inst.outputs, inst.after, inst.feeds)


def test_instances_with_finite_false_also_give_undefined_left_sides():
    found = find(testing.instances(SQRT.rule("sqrt_as_exp"), finite=False),
                 lambda inst: not _left_finite(inst),
                 settings=settings(QUIET, phases=[Phase.generate], max_examples=200))
    assert not _left_finite(found)
