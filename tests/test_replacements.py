"""Static checks of guards, lets and replacements: located at check time, caret on the part."""

import numpy as np
import pytest

import ngrules as ng
from ngrules.errors import RuleErrors
from ngrules.lang.loader import parse_rules


def only_error(text: str):
    with pytest.raises(RuleErrors) as info:
        parse_rules(text, "c.rules")
    (e,) = info.value.errors
    return e


def located(text: str, fragment: str, message: str, after: str = "") -> None:
    """The one error has `message` and its caret exactly under `fragment` (its first
    occurrence after `after`) in the text."""
    e = only_error(text)
    assert e.message == message
    line = text.split("\n")[e.span.line - 1]
    col = line.index(fragment, line.index(after) + len(after)) + 1
    assert (e.span.col, e.span.end_col) == (col, col + len(fragment)), (e.span, fragment)
    assert e.span.caret().endswith(" " * (col - 1) + "^" * len(fragment))


def test_an_op_built_without_a_required_attribute():
    located(
        "rule r: Exp(x) => Log(Broadcast(x))",
        "Broadcast",
        "Broadcast needs the attribute(s) axes=...",
    )


def test_arity_of_an_op_built_in_a_replacement():
    located("rule r: Exp(x) => Add(x)", "Add", "Add takes 2 arguments, got 1")


def test_comparing_axes_with_a_number():
    located(
        "rule r: s @ Sum(x) if s.reduction_axes == 0 => s",
        "s.reduction_axes == 0",
        "compares Axes with a number: never equal",
    )


def test_ordering_axes_against_a_number():
    located("rule r: Exp(x) if x.axes > 1 => Exp(x)", "x.axes > 1",
            "cannot order Axes and a number with '>'")


def test_a_function_called_with_the_wrong_kind_of_argument():
    located("rule r: Exp(x) if len(x) == 2 => Exp(x)", "x",
            "argument 1 of len must be Axes or a string or a tuple, not a node", after="len(")
    located("rule r: Exp(x) let u = new_axis(x.axes) => Exp(x)", "x.axes",
            "argument 1 of new_axis must be a number, not Axes")


def test_a_guard_that_is_not_true_or_false():
    located("rule r: Exp(x) if x.rank => Exp(x)", "x.rank",
            "a guard must be true or false; this is a number")


def test_a_replacement_that_is_not_a_node():
    located("rule r: Exp(x) => x.axes", "x.axes",
            "a replacement must build a node (or be a number, broadcast to the matched node); "
            "this is Axes")


def test_replacement_axes_that_the_pattern_lets_differ():
    located(
        "rule r: Sum(x) => x",
        "x",
        "the replacement's axes differ from the matched node's whenever the Sum reduces any "
        "axis: x keeps the reduced axes (add a guard such as `if x.axes == ...`)",
        after="=>",
    )


def test_elementwise_patterns_fix_every_variables_axes():
    """An elementwise op's operands carry exactly its axes, so these keep the root's axes."""
    for text in ("rule r: Exp(x) * y => Exp(x)", "rule r: x * (y / x) => y"):
        assert len(parse_rules(text, "c.rules")) == 1


@pytest.mark.parametrize("text", [
    "rule r: x * y => y * x",
    "rule r: x - x => 0",
    "rule r: x * 1 => x",
    "rule r: Exp(x) * y => Exp(x) * y + 0",
    "rule r: d @ Dot(x, y) if d.reduction_axes == () => d",
    "rule r: Exp(x) if x.dtype == \"float32\" and len(x.axes) > 1 => Exp(x)",
    "rule r: s @ Sum(x) => Sum(x, reduction_axes=s.reduction_axes)",
])
def test_sound_rules_are_not_flagged(text):
    assert len(parse_rules(text, "c.rules")) == 1


def test_a_bare_number_replacement_is_broadcast_to_the_matched_node():
    rules = parse_rules("rule zero: x - x => 0\n", "c.rules")
    a, b = ng.make_axis(3, "A"), ng.make_axis(2, "B")
    x = ng.placeholder([a, b], np.float64, name="x")
    res = ng.rewrite([ng.exp(x - x)], rules)
    (out,) = res.outputs
    assert [f.rule for f in res.trace] == ["zero"]
    zero = out.args[0]
    assert zero.axes == x.axes and zero.dtype == np.float64
    (value,) = ng.execute([out], {})
    np.testing.assert_array_equal(value, np.ones((3, 2)))


def test_a_replacement_failing_when_applied_points_at_the_replacement():
    rules = parse_rules("pass p\nrule bad: Exp(x) => Sum(x, reduction_axes=x.axes)\n", "t.rules")
    x = ng.placeholder([ng.make_axis(3, "A")], name="x")
    with pytest.raises(ng.RuleError, match="axes") as info:
        ng.rewrite([ng.exp(x)], rules)
    assert (info.value.span.line, info.value.span.col) == (2, 21)


OPERANDS = ["x", "x.axes", "x.axes[0]", "x.rank", '"float32"', "x.dtype", "1", "()", "true"]
OPERATORS = ["==", "!=", "<", ">=", "+", "-", "in"]


def _static_errors(expr: str) -> list[str]:
    try:
        parse_rules(f"rule r: Exp(x) let v = {expr} => Exp(x)", "k.rules")
    except RuleErrors as e:
        return [err.message for err in e.errors]
    return []


def _runtime(expr: str, x):
    from ngrules.errors import AxesError, NgrulesError
    from ngrules.lang.expr import evaluate
    from ngrules.lang.parser import parse

    (decl,) = parse(f"rule r: x if {expr} => x", "k.rules").decls
    try:
        return "value", evaluate(decl.clauses[0].expr, {"x": x})
    except NgrulesError as e:
        cause = e.__cause__ or e
        return ("axes" if isinstance(cause, AxesError) else "error"), None


def test_a_flagged_expression_fails_or_is_constant_when_evaluated():
    """Soundness of the static kinds on every pairing of operand kinds and operators: what
    the checker rejects raises at run time, or is `==`/`!=` between kinds that never compare
    equal (always False/True), or builds a node where a value was meant; nothing it accepts
    raises for kind reasons (axes that clash by name, `x.axes + x.axes`, are a value's fault)."""
    x = ng.placeholder([ng.make_axis(3, "A"), ng.make_axis(2, "B")], name="x")
    flagged = 0
    for left in OPERANDS:
        for op in OPERATORS:
            for right in OPERANDS:
                if op == "in" and right == "x":
                    continue  # membership in a node is the graph's business, not a kind's
                expr = f"{left} {op} {right}"
                errors = _static_errors(expr)
                outcome, value = _runtime(expr, x)
                if errors:
                    flagged += 1
                    constant = op in ("==", "!=") and value is (op == "!=")
                    assert outcome != "value" or constant or isinstance(value, ng.Node), (
                        expr, errors, value)
                else:
                    assert outcome != "error", (expr, "accepted but fails at run time")
    assert flagged > 100
