"""`explain` ranks its closest misses by how much of the pattern matched (issue 38): nodes
matched below the root first, then guards passed; ties stay in graph order."""

import ngrules as ng
from ngrules.lang.loader import parse_rules

A, B = ng.make_axis(4, "A"), ng.make_axis(3, "B")
SILU = parse_rules("pass p\nrule silu: x * Sigmoid(x) => x\n", "t.rules").rule("silu")


def _many_multiplies(n: int = 30):
    xs = [ng.placeholder([A, B], name=f"p{i}") for i in range(n)]
    return xs, [xs[i] * xs[i + 1] for i in range(n - 1)] + [xs[0] * xs[0]]


def test_the_multiply_of_a_sigmoid_of_another_node_ranks_first():
    xs, products = _many_multiplies()
    near = xs[3] * ng.sigmoid(xs[7])
    found = ng.explain(SILU, [*products[:20], near, *products[20:]])
    assert not found.matches and found.misses[0].root is near
    first = found.misses[0]
    assert first.text == "x" and str(first.span) == "t.rules:2:24"  # the failing element
    assert first.node is xs[7] and "found %" in first.found and "Placeholder(p7) [A:4, B:3]" in \
        first.found  # the graph's node there, with its id and axes
    assert all(m.text == "Sigmoid(x)" for m in found.misses[1:])


def test_a_sigmoid_under_a_layout_view_ranks_above_plain_misses_with_a_hint():
    _, products = _many_multiplies()
    d = ng.placeholder([A, B], name="d")
    imported = ng.axes_with_order(d, [B, A]) * ng.axes_with_order(ng.sigmoid(d), [B, A])
    found = ng.explain(SILU, [*products, imported])  # the importer's SiLU, last in graph order
    first = found.misses[0]
    assert first.root is imported and first.text == "Sigmoid(x)"
    assert "a Sigmoid under ReorderAxes" in first.found
    assert "`ReorderAxes?(Sigmoid(x))` would" in first.found
    # and a real partial match of the same depth still beats it
    near = products[0].args[0] * ng.sigmoid(products[1].args[1])
    assert ng.explain(SILU, [imported, near]).misses[0].root is near


def test_a_false_guard_ranks_above_a_pattern_that_failed_and_guards_passed_count():
    rules = parse_rules(
        "pass p\nrule g: s @ Sum(Exp(x)) if len(s.reduction_axes) == 1 and x.axes[0] == x.axes[0]"
        " => s\n", "t.rules",
    )
    x = ng.placeholder([A, B], name="x")
    wrong_op = ng.sum(ng.tanh(x), reduction_axes=[A, B])
    false_guard = ng.sum(ng.exp(x), reduction_axes=[A, B])
    found = ng.explain(rules.rule("g"), [wrong_op, false_guard])
    assert [m.root for m in found.misses] == [false_guard, wrong_op]
    assert "the guard is false" in found.misses[0].found
    assert found.misses[0].score > found.misses[1].score


def test_the_explain_bench_runs_small_and_ranks_its_two_near_misses_first():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "bench" / "explain.py"
    spec = importlib.util.spec_from_file_location("bench_explain", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    outputs = bench.graph(400)
    found = ng.explain(SILU, outputs)
    assert [m.root for m in found.misses[:2]] == outputs[-1:] + outputs[-2:-1]
    assert set(bench.main(400, runs=1)) == {"silu", "fma", "guarded", "absent"}


def test_a_literal_that_differs_shows_the_value_the_graph_holds_there():
    rule = parse_rules("pass p\nrule mul_one: x * 1 => x\n", "t.rules").rule("mul_one")
    x = ng.placeholder([A, B], name="x")
    found = ng.explain(rule, [x * 0.5, ng.exp(x) * x])
    first = found.misses[0]
    assert first.text == "1" and str(first.span) == "t.rules:2:19"
    assert first.found.endswith("[A:4, B:3], which is 0.5 everywhere, not 1")
    assert found.misses[1].found.endswith("not known to be 1 everywhere")
