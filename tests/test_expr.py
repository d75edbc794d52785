"""The expression evaluator, the function library and the kinds table."""

import numpy as np
import pytest

import ngrules as ng
from ngrules.errors import NgrulesError, RuleError
from ngrules.ir.ops import TRAITS
from ngrules.lang.expr import evaluate
from ngrules.lang.functions import FUNCTIONS, register_function
from ngrules.lang.kinds import KINDS
from ngrules.lang.parser import parse

C, N = ng.make_axis(4, "C"), ng.make_axis(8, "N")


def ev(text: str, **env):
    (decl,) = parse(f"rule r: x if {text} => x").decls
    return evaluate(decl.clauses[0].expr, env)


@pytest.fixture
def nodes():
    x = ng.placeholder([C, N], name="x")
    w = ng.placeholder([C], name="w")
    return {"x": x, "w": w, "d": ng.dot(w, x)}


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("x.axes.names", ("C", "N"), id="axes-names"),
        pytest.param("x.rank", 2, id="rank"),
        pytest.param("x.op", "Placeholder", id="op"),
        pytest.param("x.axes[0].length", 4, id="axis-length"),
        pytest.param("x.axes.size", 32, id="axes-size"),
        pytest.param("d.reduction_axes.names", ("C",), id="derived-property"),
        pytest.param("(x.axes - d.reduction_axes).names", ("N",), id="axes-difference"),
        pytest.param("(w.axes | x.axes).names", ("C", "N"), id="axes-union"),
        pytest.param("d.axes == x.axes[1:]", True, id="compare-axes"),
        pytest.param("d.reduction_axes == ()", False, id="compare-with-tuple"),
        pytest.param("len(x.axes) * 2 - 1 / 2", 3.5, id="arithmetic"),
        pytest.param("not is_scalar(x) and size(x) == 32", True, id="functions"),
        pytest.param('x.dtype == "float32"', True, id="dtype"),
        pytest.param("w.axes[0] in x.axes", True, id="in"),
        pytest.param("false and undefined", False, id="short-circuit"),
    ],
)
def test_values(nodes, text, expected):
    assert ev(text, **nodes) == expected


def test_builders_and_ops_make_nodes(nodes):
    out = ev("Sum(x * 2, reduction_axes=x.axes[:1])", **nodes)
    assert out.op == "Sum" and out.axes == ng.make_axes([N])
    assert ev("broadcast(w, x.axes)", **nodes).axes == nodes["x"].axes


def test_indexing_a_multi_output_node_gives_an_output(nodes):
    x, g = nodes["x"], nodes["w"]
    fused = ng.make_node("BatchnormFprop", (x, g, g), eps=1e-3)
    picked = ev("t[2]", t=fused)
    assert picked.op == "Output" and picked.attrs["index"] == 2


def test_errors_are_located_at_the_failing_sub_expression(nodes):
    with pytest.raises(RuleError) as info:
        ev("len(x.axes) > 0 and x.axes.sise > 1", **nodes)
    assert info.value.message == "an Axes has no attribute 'sise' (did you mean 'size'?)"
    assert (info.value.span.line, info.value.span.col) == (1, 34)


def test_python_errors_become_rule_errors(nodes):
    with pytest.raises(RuleError, match="'/' failed: division by zero") as info:
        ev("x.rank / 0", **nodes)
    assert info.value.span.col == 14


def test_registered_function_is_callable_and_checked():
    register_function("twice_test", lambda v: 2 * v, doc="doubles")
    try:
        assert ev("twice_test(21)") == 42
        assert FUNCTIONS["twice_test"].min_args == 1 == FUNCTIONS["twice_test"].max_args
        with pytest.raises(NgrulesError, match="already registered"):
            register_function("twice_test", abs)
    finally:
        del FUNCTIONS["twice_test"]


@pytest.mark.parametrize("name", ["Fused", "if", "9x", "len"], ids=str)
def test_register_function_rejects_bad_names(name):
    with pytest.raises(NgrulesError):
        register_function(name, abs)


def test_failing_registered_function_names_itself():
    register_function("boom_test", lambda: 1 / 0)
    try:
        with pytest.raises(RuleError, match=r"boom_test\(...\) failed: ZeroDivisionError"):
            ev("boom_test()")
    finally:
        del FUNCTIONS["boom_test"]


def test_kinds_cover_every_trait_and_more(nodes):
    assert set(KINDS) == set(TRAITS) | {"scalar", "constant"}
    c = ng.constant(np.float32(2.0), [C])
    assert KINDS["constant"](c) and not KINDS["constant"](nodes["x"])
    assert KINDS["view"](c) and KINDS["leaf"](nodes["x"])
    assert KINDS["scalar"](ng.constant(1.0)) and not KINDS["scalar"](nodes["x"])
    assert ev("value(c)", c=c) == 2.0
