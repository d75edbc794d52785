"""Clauses compiled to Python compute what the interpreter computes; errors fall back to it."""

import pytest

import ngrules as ng
from ngrules.lang.expr import NotBoolean, evaluate
from ngrules.lang.exprgen import compile_clauses
from ngrules.lang.parser import parse

C, N = ng.make_axis(4, "C"), ng.make_axis(8, "N")
EXPRESSIONS = [
    "x.axes.names",
    "x.rank",
    "x.op",
    "x.shape",
    "x.axes[0].length",
    "x.axes.size",
    "d.reduction_axes.names",
    "(x.axes - d.reduction_axes).names",
    "(w.axes | x.axes).names",
    "d.axes == x.axes[1:]",
    "x.axes[:1] != w.axes",
    "d.reduction_axes == ()",
    "len(x.axes) * 2 - 1 / 2",
    "-x.rank + 3 >= 1 or false",
    "not is_scalar(x) and size(x) == 32",
    'x.dtype == "float32"',
    "w.axes[0] in x.axes",
    "(x.rank, w.rank)",
    "Sum(x * 2, reduction_axes=x.axes[:1])",
    "broadcast(w, x.axes)",
    "d.axes == x.axes - w.axes",  # compared with no Axes built
    "w.axes != x.axes - d.axes",
    "x.rank == 3 - 1",  # a difference of numbers: the general path
    "x.axes == w.axes",
    "x.op != w.op",
    "x.rank * 1.5 == 3.0",  # a float's product: in line
    "0.5 * size(x) + len(x.axes.names)",  # len of a tuple, not of Axes
    "len(x.axes) * x.rank == 4",  # an integer product: bounded
    "(1, 2) * x.rank",  # a sequence's product: bounded
]


@pytest.fixture
def env():
    x = ng.placeholder([C, N], name="x")
    w = ng.placeholder([C], name="w")
    return {"x": x, "w": w, "d": ng.dot(w, x)}


def _expr(text: str):
    (decl,) = parse(f"rule r: x if {text} => x").decls
    return decl.clauses[0].expr


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_a_compiled_expression_gives_the_interpreters_value(env, text):
    expr = _expr(text)
    run = compile_clauses([], [expr])
    assert run is not None and "rule" not in run.source  # nothing from rule text is pasted
    assert run(env) == (evaluate(expr, env),)


def test_lets_and_guards_run_in_order_and_a_false_guard_gives_none(env):
    (rule,) = ng.parse_rules(
        "pass p\nrule r: x * y\n    let k = x.rank + 1\n    if k == 3\n    let j = k * 2\n"
        "    if j > 5 and y.rank == 1\n    => x"
    ).rules
    run = compile_clauses(rule.clauses, rule.replacement)
    assert run({"x": env["x"], "y": env["w"]}) == (env["x"],)
    assert run({"x": env["w"], "y": env["w"]}) is None


def test_a_guard_that_is_not_a_boolean_raises_for_the_interpreter_to_report(env):
    run = compile_clauses([parse("rule r: x if x.axes => x").decls[0].clauses[0]], [])
    with pytest.raises(NotBoolean):
        run(env)


def test_a_short_circuited_unbound_name_is_left_to_the_interpreter(env):
    """Bindings are read up front, so the compiled code raises where the interpreter, which
    reads lazily, gives a value; the engine then uses the interpreter's."""
    expr = _expr("false and undefined")
    with pytest.raises(KeyError):
        compile_clauses([], [expr])(env)
    assert evaluate(expr, env) is False


def test_a_failing_guard_in_a_rewrite_is_reported_located_as_before():
    """The generated code fails; the interpreter then locates the failure, which rejects the
    match and is reported as a warning."""
    rules = ng.parse_rules("pass p\nrule r: Exp(x)\n    if x.rank / 0 > 1\n    => x", "g.rules")
    x = ng.placeholder([C], name="x")
    res = ng.rewrite([ng.exp(x)], rules)
    assert res.fired() == {} and res.stats["r"].failures == 1
    failure = res.stats["r"].first_failure
    assert "'/' failed: division by zero" in failure.message and failure.span.line == 3
    assert "rule r (g.rules:2)" in failure.message


@pytest.mark.parametrize(
    "text", ["pow(2, 1000) * pow(2, 1000)", "pow(2, 1023) + pow(2, 1023)", "x.axes.names * 6000"]
)
def test_compiled_arithmetic_keeps_the_languages_bounds(env, text):
    """Past the bounds the compiled code raises as the interpreter does (which then reports
    it, located), instead of computing a value the interpreter refuses."""
    expr = _expr(text)
    with pytest.raises(ng.RuleError, match="too large"):
        evaluate(expr, env)
    with pytest.raises(ng.NgrulesError, match="too large"):
        compile_clauses([], [expr])(env)


def test_a_registered_function_past_the_bounds_raises_in_compiled_code_too(env):
    from ngrules.lang.functions import FUNCTIONS, register_function

    register_function("many_zeros_test", lambda n: (0,) * n)
    try:
        expr = _expr("many_zeros_test(20000)")
        with pytest.raises(ng.RuleError, match="too large"):
            evaluate(expr, env)
        with pytest.raises(ng.NgrulesError, match="too large"):
            compile_clauses([], [expr])(env)
    finally:
        del FUNCTIONS["many_zeros_test"]


def test_lets_that_double_an_integer_stop_at_the_bound_in_a_rewrite():
    """Each `a * a` doubles the bits: unchecked, a few more lets would run for minutes."""
    rules = ng.parse_rules(
        "pass p\nrule r: Exp(x)\n    let a = pow(2, 1000)\n    let b = a * a\n    => x", "b.rules"
    )
    res = ng.rewrite([ng.exp(ng.placeholder([C], name="x"))], rules)
    assert res.fired() == {} and res.stats["r"].failures == 1
    assert res.warnings[0].startswith("b.rules:4:13: warning:") and "too large" in res.warnings[0]
