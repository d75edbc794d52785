"""Feeds given to `execute` and `check_rewrite`, inputs that share a name, values too big to
allocate, and the error classes users catch as ValueError."""

import numpy as np
import pytest

import ngrules as ng
from ngrules.errors import AxesError, ExecutionError, GraphError, NgrulesError, OpError
from ngrules.verification import testing


def _graph():
    x = ng.placeholder({"C": 2}, name="fx")
    return x, ng.tanh(x)


def _bad_feed(y, key, value) -> str:
    with pytest.raises(ExecutionError) as info:
        ng.execute([y], {key: value})
    return str(info.value)


# -- item 25 -------------------------------------------------------------------------------------
def test_feeds_keyed_by_an_int_a_foreign_node_or_an_unknown_name_get_one_error():
    x, y = _graph()
    value = np.zeros(2, np.float32)
    other = ng.placeholder({"C": 2}, name="elsewhere")
    messages = [
        _bad_feed(y, 0, value),
        _bad_feed(y, other, value),
        _bad_feed(y, "nope", value),
        _bad_feed(y, y, value),  # a node of this graph that is not an input
    ]
    for message in messages:
        assert "which is not an input of this graph" in message and "inputs: fx" in message
    assert "keyed by 0," in messages[0] and "keyed by <Placeholder elsewhere" in messages[1]
    assert "keyed by the name 'nope'," in messages[2]


def test_ignore_unused_feeds_inputs_of_other_graphs_but_not_nonsense():
    x, y = _graph()
    other = ng.placeholder({"C": 2}, name="elsewhere")
    feeds = {x: np.ones(2, np.float32), other: np.zeros(2, np.float32), "gone": 1.0}
    (value,) = ng.execute([y], feeds, ignore_unused=True)
    np.testing.assert_allclose(value, np.tanh(np.ones(2)), rtol=1e-6)
    with pytest.raises(ExecutionError):
        ng.execute([y], {x: np.ones(2, np.float32), 7: 0.0}, ignore_unused=True)


# -- item 26 -------------------------------------------------------------------------------------
def test_a_variable_too_big_to_allocate_is_an_execution_error_naming_it():
    huge = ng.variable({"H": 2**31, "W": 2**31}, name="huge", initial=1.0)
    with pytest.raises(ExecutionError) as info:
        ng.execute([ng.tanh(huge)])
    message = str(info.value)
    assert "huge" in message and f"{2**62 * 4} bytes" in message


# -- item 27 -------------------------------------------------------------------------------------
def _two_inputs_named_x():
    a = ng.placeholder({"C": 2}, name="twin")
    b = ng.placeholder({"C": 3}, name="twin")
    return ng.sum(a, out_axes=()) + ng.sum(b, out_axes=())


def test_two_inputs_with_one_name_are_detected_by_execute():
    with pytest.raises(ExecutionError, match="two inputs are named 'twin'"):
        ng.execute([_two_inputs_named_x()], {"twin": np.zeros(2, np.float32)})


def test_two_inputs_with_one_name_are_detected_by_validate():
    with pytest.raises(GraphError, match="two placeholders are named 'twin'"):
        ng.validate([_two_inputs_named_x()])


def test_a_name_shared_with_a_variable_cannot_be_fed_by_name_only_by_node():
    a = ng.placeholder({"C": 2}, name="shared", dtype=np.float64)
    v = ng.variable({"C": 3}, name="shared", initial=2.0, dtype=np.float64)
    y = ng.sum(a, out_axes=()) + ng.sum(v, out_axes=())
    with pytest.raises(ExecutionError, match="feed them by node, not by name"):
        ng.execute([y], {"shared": np.ones(2)})
    assert ng.execute([y], {a: np.ones(2)})[0] == 8.0


# -- item 28 -------------------------------------------------------------------------------------
def test_check_rewrite_takes_feeds_by_name():
    x = ng.placeholder({"C": 3}, name="byname", dtype=np.float64)
    before, after = [x * 1.0], [x]
    testing.check_rewrite(before, after, {"byname": np.arange(3.0)})
    with pytest.raises(AssertionError, match="results differ"):
        testing.check_rewrite(before, [x + 1.0], {"byname": np.arange(3.0)})
    with pytest.raises(ExecutionError, match="'nobody'"):
        testing.check_rewrite(before, after, {"nobody": np.arange(3.0)})


# -- also found: the errors ngraph raised as ValueError ------------------------------------------
@pytest.mark.parametrize("cls", [AxesError, OpError, ExecutionError])
def test_axes_op_and_execution_errors_are_value_errors(cls):
    assert issubclass(cls, ValueError) and issubclass(cls, NgrulesError)


def test_except_value_error_catches_real_failures():
    with pytest.raises(ValueError):
        ng.make_axes([ng.Axis("C", 2), ng.Axis("C", 2)])  # AxesError
    with pytest.raises(ValueError):
        ng.make_node("Zzyzx", ())  # OpError
    x, y = _graph()
    with pytest.raises(ValueError):
        ng.execute([y])  # ExecutionError: a missing feed
