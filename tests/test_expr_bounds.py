"""The expression language's cost bounds (issue 11, item 22): integers and sequences that
would grow past them are located errors, raised before the work is done."""

from __future__ import annotations

import pytest

import ngrules as ng
from ngrules.lang import bounds
from ngrules.lang.expr import evaluate
from ngrules.lang.parser import parse

TOO_LARGE = [
    "pow(10, 100000000)",
    "pow(-3, 100000000)",
    "(1, 2) * 100000000",
    "100000000 * (1, 2)",
    '"ab" * 100000000',
    "pow(2, 1000) * pow(2, 1000)",
    "pow(2, 1024) + pow(2, 1024)",
    "len((0,) * 9000 + (0,) * 9000)",
]


def _expr(text: str):
    (rule,) = parse(f"rule r: x => {text}", "t.rules").decls
    return rule.replacement[0]


@pytest.mark.parametrize("text", TOO_LARGE)
def test_values_past_the_bounds_are_located_errors(text):
    with pytest.raises(ng.RuleError, match="is too large") as err:
        evaluate(_expr(text), {})
    assert str(err.value).startswith("t.rules:1:")


@pytest.mark.parametrize(
    ("text", "value"),
    [("pow(2, 1023)", 2**1023), ("pow(2, -1)", 0.5), ("pow(2.0, 2000)", float("inf")),
     ("pow(-2.0, 2001)", float("-inf")), ("len((0,) * 10000)", 10000), ("pow(-1, 1000000000)", 1)],
)
def test_values_within_the_bounds_are_computed(text, value):
    assert evaluate(_expr(text), {}) == value


def test_pow_of_a_negative_float_to_a_fraction_is_nan_not_complex():
    result = evaluate(_expr("pow(-8.0, 0.5)"), {})
    assert isinstance(result, float) and result != result


def test_an_integer_literal_past_the_bound_is_a_syntax_error():
    digits = "9" * 400
    with pytest.raises(ng.RuleSyntaxError, match="too large") as err:
        parse(f"rule r: x if {digits} > 0 => x")
    assert err.value.span.col == 14
    assert bounds.MAX_INT_BITS < 400 * 3.3


def test_a_let_that_would_run_for_minutes_is_rejected_at_once_in_a_rewrite():
    rs = ng.parse_rules("rule r: Exp(x) let v = pow(10, 100000000) => x", "t.rules")
    res = ng.rewrite([ng.exp(ng.placeholder([ng.make_axis(2, "A")], name="p"))], rs)
    assert res.fired() == {} and res.stats["r"].failures == 1
    assert res.warnings[0].startswith("t.rules:1:24: warning:")
