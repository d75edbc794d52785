"""A guard's verdict comes from its value, never its Python type: numpy's bools and integers
(an op's attributes, a registered function's result) are true or false like Python's (issue 35
item 5; `p.paddings[0][0] == 0` gave `np.True_`, and the rule was reported ill-formed)."""

import numpy as np
import pytest

import ngrules as ng
from ngrules.engine.bindings import match_bindings
from ngrules.lang.expr import NotBoolean, guard_truth
from ngrules.lang.exprgen import compile_clauses
from ngrules.lang.functions import FUNCTIONS, register_function
from ngrules.verification.verify import verify

PAD_RULES = """pass p
rule pad_nothing:
    p @ Pad(x)
    if x.rank == 1
    if p.paddings[0][0] == 0
    if p.paddings[0][1] == 0
    => x
"""


@pytest.mark.parametrize("value, truth", [
    (True, True), (False, False), (np.True_, True), (np.False_, False),
    (np.int64(0), False), (np.int64(3), True), (np.int32(1), True), (0, False), (2, True),
    (np.array(True), True), (np.array(0, np.int8), False),
])
def test_booleans_and_integers_of_python_and_numpy_are_guard_values(value, truth):
    assert guard_truth(value) is truth


@pytest.mark.parametrize("value", [0.5, np.float64(1.0), None, (1,), "yes", np.array([1, 0])])
def test_anything_else_is_not_a_guard_value(value):
    with pytest.raises(NotBoolean):
        guard_truth(value)


def test_the_generated_clauses_read_a_numpy_bool_as_a_guard():
    rule = ng.parse_rules(PAD_RULES).rule("pad_nothing")
    run = compile_clauses(rule.clauses, rule.replacement)
    x = ng.placeholder([ng.make_axis(3, "a")], name="x")
    assert run({"p": ng.pad(x, [(0, 1)]), "x": x}) is None  # np.False_: false, no error
    padded = ng.make_node("Pad", (x,), paddings=np.zeros((1, 2), np.int64), axes=x.axes)
    assert run({"p": padded, "x": x}) == (x,)


def test_a_rule_guarded_by_numpy_comparisons_rewrites_and_verifies():
    rules = ng.parse_rules(PAD_RULES)
    x = ng.placeholder([ng.make_axis(3, "a")], name="x")
    unpadded = ng.make_node("Pad", (x,), paddings=np.zeros((1, 2), np.int64), axes=x.axes)
    assert ng.rewrite([ng.exp(unpadded)], rules).outputs[0].args[0] is x
    assert match_bindings(rules.rule("pad_nothing"), [unpadded]) is not None  # explain's path
    report = verify(rules, 5)
    assert report["pad_nothing"].status == "verified", str(report)


def test_a_registered_function_may_answer_with_a_numpy_integer():
    register_function("has_axes_test", lambda n: np.int64(len(n.axes)))
    try:
        rules = ng.parse_rules("pass p\nrule r: Exp(x) if has_axes_test(x) => Tanh(x)\n")
        scalar = ng.placeholder([], name="s")
        vector = ng.placeholder([ng.make_axis(2, "a")], name="v")
        assert ng.rewrite([ng.exp(scalar)], rules).outputs[0].op == "Exp"  # np.int64(0)
        assert ng.rewrite([ng.exp(vector)], rules).outputs[0].op == "Tanh"
    finally:
        del FUNCTIONS["has_axes_test"]
