"""ngrules.testing: public strategies for users' property tests, and check_rewrite."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

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


def test_check_rewrite_refuses_inputs_the_graph_cannot_take():
    x = ng.placeholder([ng.make_axis(2, "A")], name="x")
    with pytest.raises(AssertionError, match="non-finite"):
        testing.check_rewrite([ng.log(x)], [x], {x: np.array([-1.0, 1.0], np.float32)})
