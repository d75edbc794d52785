"""The rewrite engine: matching semantics, driver, safety, trace, cycles, explain."""

import numpy as np
import pytest

import ngrules as ng
from ngrules.ir.graph import format_graph, toposort

A, B = ng.make_axis(3, "A"), ng.make_axis(2, "B")


def rules(text: str):
    return ng.parse_rules(text, "t.rules")


def leaves(*names, axes=(A,)):
    return [ng.placeholder(list(axes), name=n) for n in names]


def fired(res) -> list[str]:
    return [f.rule for f in res.trace]


# -- matching semantics ------------------------------------------------------------------------
def test_a_variable_used_twice_binds_one_node():
    rs = rules("rule sq: x * x => Square(x)")
    p, q = leaves("p", "q")
    assert fired(ng.rewrite([p * p], rs)) == ["sq"]
    assert fired(ng.rewrite([p * q], rs)) == []


def test_a_shared_interior_subpattern_is_one_node():
    rs = rules("""
    rule factor:
        Add(Multiply(h, y), Multiply(h, z))
        where h = Exp(_)
        => Multiply(h, Add(y, z))
    """)
    p, q, r, s = leaves("p", "q", "r", "s")
    same = ng.exp(p) * q + ng.exp(p) * r
    res = ng.rewrite([same], rs)
    assert fired(res) == ["factor"] and res.outputs[0].op == "Multiply"
    # two different Exp nodes: ngraph matched each occurrence separately; ngrules must not
    assert fired(ng.rewrite([ng.exp(p) * q + ng.exp(s) * r], rs)) == []


def test_literals_match_by_value_through_broadcasts():
    rs = rules("rule mul_one: x * 1 => x")
    (p,) = leaves("p")
    assert ng.rewrite([p * 1.0], rs).outputs == [p]
    assert fired(ng.rewrite([p * 2.0], rs)) == []  # another value: no match
    assert fired(ng.rewrite([p * ng.constant(np.ones(3), [A])], rs)) == ["mul_one"]
    mixed = ng.constant(np.array([1.0, 2.0, 1.0]), [A])
    assert fired(ng.rewrite([p * mixed], rs)) == []
    (q,) = leaves("q")
    assert fired(ng.rewrite([p * q], rs)) == []  # a placeholder is not a known constant


def test_literals_compare_in_the_nodes_dtype():
    rs = rules("rule add_tenth: x + 0.1 => x")
    p = ng.placeholder([A], name="p")
    assert fired(ng.rewrite([p + 0.1], rs)) == ["add_tenth"]  # float32 0.1 is not 0.1
    for dtype in (np.float16, np.float64):  # float16's 0.1 is 0.0999755859375
        h = ng.placeholder([A], name="h", dtype=dtype)
        tenth = ng.constant(0.1, [A], dtype=dtype)
        assert fired(ng.rewrite([h + tenth], rs)) == ["add_tenth"], dtype


def test_typed_variables_restrict_what_they_bind():
    rs = rules("rule drop: Negative(c: constant) + x => x - c")
    (p,) = leaves("p")
    c = ng.constant(np.arange(3.0), [A])
    assert fired(ng.rewrite([-c + p], rs)) == ["drop"]
    (q,) = leaves("q")
    assert fired(ng.rewrite([-q + p], rs)) == []


def test_optional_wrapper_backtracks_when_skipping_fails():
    rs = rules("rule cancel: Negative(Broadcast?(y)) + y => y - y")
    p = ng.placeholder([A], name="p")
    b = ng.broadcast(p, [A, B])
    # greedy skipping binds y to p under the broadcast and then fails on the second y
    res = ng.rewrite([-b + b], rs)
    assert fired(res) == ["cancel"]
    (out,) = res.outputs
    assert out.op == "Subtract" and out.args == (b, b)  # y is the broadcast, not p


def test_optional_wrapper_is_tried_present_first_then_absent():
    from ngrules.engine.match import all_matches, compile_pattern

    (pattern,) = rules("rule r: Exp(Broadcast?(y)) => Exp(y)").rules[0].roots
    p = ng.placeholder([A], name="p")
    b = ng.broadcast(p, [A, B])
    assert [m["y"] for m in all_matches(compile_pattern(pattern), ng.exp(b))] == [p, b]


def test_nested_commutative_match_uses_the_inner_nodes_other_order():
    rs = rules("rule absorb: Add(Multiply(x, y), x) => Multiply(x, Add(y, 1))")
    p, q = leaves("p", "q")
    res = ng.rewrite([p * q + q], rs)  # needs Multiply's arguments swapped: x = q, y = p
    assert fired(res) == ["absorb"]
    (before,), (after,) = ng.execute([p * q + q], _feeds()), ng.execute(res.outputs, _feeds())
    np.testing.assert_allclose(before, after, rtol=1e-6)


def test_guards_see_attributes_and_can_reject():
    rs = rules("""
    rule sum_one_axis: s @ Sum(x) if len(s.reduction_axes) == 1 => s * 1
    """)
    x = ng.placeholder([A, B], name="x")
    res = ng.rewrite([ng.sum(x, reduction_axes=[B])], rs, fuel=5)
    assert fired(res)[0] == "sum_one_axis"
    assert fired(ng.rewrite([ng.sum(x, reduction_axes=[A, B])], rs)) == []


def test_multi_root_rule_replaces_each_root_with_an_output():
    rs = rules("""
    rule sum_and_max:
        s @ Sum(x), m @ Max(x)
        if s.reduction_axes == m.reduction_axes
        => (Sum(x, reduction_axes=s.reduction_axes) * 1,
            Max(x, reduction_axes=m.reduction_axes) * 1)
    """)
    x = ng.placeholder([A, B], name="x")
    s, m = ng.sum(x, reduction_axes=[B]), ng.max(x, reduction_axes=[B])
    res = ng.rewrite([s, m], rs, fuel=1)
    assert fired(res) == ["sum_and_max"] and res.trace[0].roots == (s, m)
    assert [o.op for o in res.outputs] == ["Multiply", "Multiply"]


# -- driver --------------------------------------------------------------------------------------
def test_first_rule_in_file_order_wins_unless_a_priority_says_otherwise():
    (p,) = leaves("p")
    two = "rule a: x * 1 => x\nrule b: x * (c: constant) => x * c\n"
    assert fired(ng.rewrite([p * 1.0], rules(two), fuel=1)) == ["a"]
    prio = "rule a: x * 1 => x\nrule b priority 5: x * (c: constant) => Negative(Negative(x))\n"
    assert fired(ng.rewrite([p * 1.0], rules(prio), fuel=1)) == ["b"]


def test_pipelines_run_passes_in_order():
    rs = rules("""
    pass first
    rule neg_neg: -(-x) => x
    pass second
    rule exp_log: Exp(Log(x)) => x
    pipeline both: second, first
    """)
    (p,) = leaves("p")
    res = ng.rewrite([ng.exp(ng.log(-(-p)))], rs, pipeline="both")
    assert res.outputs == [p] and fired(res) == ["exp_log", "neg_neg"]
    assert res.passes == ["second", "first"]
    with pytest.raises(ng.NgrulesError, match="no pipeline named 'bth'.*did you mean 'both'"):
        ng.rewrite([p], rs, pipeline="bth")


def test_the_input_graph_is_never_changed():
    rs = rules("rule mul_one: x * 1 => x\nrule add_zero: x + 0 => x")
    (p,) = leaves("p")
    out = ng.tanh(p * 1.0 + 0.0)
    text = format_graph([out])
    res = ng.rewrite([out], rs)
    assert format_graph([out]) == text
    assert format_graph(res.outputs) != text


def test_rewrites_preserve_values():
    rs = rules("rule mul_one: x * 1 => x\nrule add_zero: x + 0 => x\nrule neg_neg: -(-x) => x")
    p, q = leaves("p", "q")
    out = ng.tanh(-(-(p * 1.0)) + q) * 1.0 + 0.0
    res = ng.rewrite([out], rs)
    assert res.stop == "fixpoint" and len(toposort(res.outputs)) < len(toposort([out]))
    np.testing.assert_allclose(ng.execute([out], _feeds())[0], ng.execute(res.outputs, _feeds())[0])


def test_deep_graphs_rewrite_without_recursion_error():
    rs = rules("rule mul_one: x * 1 => x\nrule neg_neg: -(-x) => x")
    (x,) = leaves("p")
    for i in range(50_000):
        x = ng.tanh(x) * 1.0 if i % 2 else -(-ng.exp(x))
    depth = len(toposort([x]))
    assert depth >= 100_000  # a chain: every node is one level deeper than the last
    res = ng.rewrite([x], rs)
    assert res.stop == "fixpoint" and len(res.trace) == 50_000
    left = toposort(res.outputs)
    assert len(left) == 50_001 and {n.op for n in left} == {"Placeholder", "Exp", "Tanh"}


# -- safety ------------------------------------------------------------------------------------
def test_a_replacement_with_other_axes_is_an_error_naming_the_rule():
    # the guard hides the axes change from the static check, so the engine must catch it
    rs = rules("\n\nrule bad: s @ Sum(x) if x.rank > 0 => x")
    x = ng.placeholder([A, B], name="x")
    out = ng.sum(x, reduction_axes=[B])
    text = format_graph([out])
    with pytest.raises(ng.RuleError, match=r"rule bad \(t.rules:3\).*axes") as err:
        ng.rewrite([out], rs)
    assert str(err.value).startswith("t.rules:3:")
    assert format_graph([out]) == text


def test_a_bound_node_of_other_axes_returned_without_clauses_is_an_error_naming_the_rule():
    # `=> x` alone takes the matcher's fast path (Broadcast(x) => x is refused when loaded)
    rs = rules("\n\nrule bad: Unflatten(x) => x")
    out = ng.unflatten(ng.flatten(ng.placeholder([A, B], name="x")))
    with pytest.raises(ng.RuleError, match=r"rule bad \(t.rules:3\).*axes") as err:
        ng.rewrite([out], rs)
    assert str(err.value).startswith("t.rules:3:")


def test_an_expression_failing_at_one_match_rejects_that_match_and_the_rewrite_goes_on():
    ng.register_function("explode", lambda x: 1 / 0, arity=1)
    try:
        rs = rules(
            "rule boom: Exp(x) => Exp(x) * explode(x)\n"
            "rule guarded: Log(x) if explode(x) > 0 => x\n"
            "rule neg_neg: -(-x) => x\n"
        )
        p, q = leaves("p", "q")
        res = ng.rewrite([ng.exp(-(-p)), ng.log(q), ng.exp(q)], rs)
    finally:
        ng.functions.FUNCTIONS.pop("explode", None)
    assert res.stop == "fixpoint" and res.fired() == {"neg_neg": 1}
    assert res.outputs == [ng.exp(p), ng.log(q), ng.exp(q)]
    assert (res.stats["boom"].failures, res.stats["guarded"].failures) == (2, 1)
    boom, guarded = res.warnings
    assert boom.startswith("t.rules:1:31: warning: rule boom (t.rules:1): explode(...) failed")
    assert "ZeroDivisionError" in boom and "2 rejected in all" in boom
    assert guarded.startswith("t.rules:2:")


def test_checked_mode_validates_after_rewrites():
    rs = rules("rule mul_one: x * 1 => x")
    (p,) = leaves("p")
    res = ng.rewrite([ng.exp(p * 1.0)], rs, checked=True)
    assert res.outputs == [ng.exp(p)]


# -- termination ---------------------------------------------------------------------------------
def test_a_two_rule_cycle_stops_and_names_both_rules_in_order():
    rs = rules("""
    rule to_sub: Negative(x) => Subtract(0, x)
    rule to_neg: Subtract(z, x) if value(z) == 0 => Negative(x)
    """)
    rs2 = rules("rule swap: a + b => b + a")
    (p,) = leaves("p")
    res = ng.rewrite([ng.exp(-p)], rs)
    assert res.stop == "cycle" and res.cycle == ("to_sub", "to_neg")
    assert "to_sub (t.rules:2)" in res.message and "to_neg (t.rules:3)" in res.message
    res2 = ng.rewrite([p + leaves("q")[0]], rs2)
    assert res2.stop == "cycle" and set(res2.cycle) == {"swap"}


def test_fuel_bounds_the_number_of_rewrites():
    rs = rules("rule neg_neg: -(-x) => x")
    (x,) = leaves("p")
    for _ in range(20):
        x = ng.exp(-(-x))
    res = ng.rewrite([x], rs, fuel=7)
    assert res.stop == "fuel" and len(res.trace) == 7 and "fuel ran out" in res.message


def test_a_rule_that_regrows_what_it_rewrote_is_reported_as_a_cycle():
    rs = rules("rule grow: Exp(x) => Exp(Exp(x)) * 1")
    res = ng.rewrite([ng.exp(leaves("p")[0])], rs)
    assert res.stop == "cycle" and res.cycle == ("grow",)


# -- trace, stats, provenance --------------------------------------------------------------------
def test_trace_records_rule_location_root_and_new_nodes():
    rs = rules("# header\nrule exp_log: Exp(Log(x)) => x * 1.5\n")
    (p,) = leaves("p")
    root = ng.exp(ng.log(p))
    res = ng.rewrite([root], rs)
    (f,) = res.trace
    assert (f.rule, f.location, f.root) == ("exp_log", "t.rules:2", root)
    assert res.outputs[0] in f.new_nodes and res.outputs[0].origin.name == "exp_log"
    stats = res.stats["exp_log"]
    assert (stats.attempts, stats.matches) == (1, 1) and stats.seconds >= 0


def test_locations_are_the_traces_without_building_it():
    rs = rules("rule exp_log: Exp(Log(x)) => x\nrule neg_neg: -(-x) => x\n"
               "rule sq: x * x => Square(x)\n")
    (p,) = leaves("p")
    res = ng.rewrite([ng.exp(ng.log(-(-p))) * ng.exp(ng.log(-(-p)))], rs)
    assert res.locations() == {"neg_neg": "t.rules:2", "exp_log": "t.rules:1", "sq": "t.rules:3"}
    assert res._trace is None  # `=> x` firings at roots not built: not rebuilt for this
    assert res.locations() == {f.rule: f.location for f in res.trace}


def test_attempts_are_timed_only_when_stats_are_asked_for():
    rs = rules("rule exp_log: Exp(Log(x)) => x\nrule neg_neg: -(-x) => x\n")
    (p,) = leaves("p")
    graph = [ng.exp(ng.log(-(-p)))]
    untimed, timed = ng.rewrite(graph, rs), ng.rewrite(graph, rs, stats=True)
    assert untimed.outputs == timed.outputs == [p]
    for name in ("exp_log", "neg_neg"):
        a, b = untimed.stats[name], timed.stats[name]
        assert (a.attempts, a.matches) == (b.attempts, b.matches) and a.matches == 1
        assert a.seconds == 0 and b.seconds > 0



def test_a_rule_applied_outside_a_rewrite_leaves_a_returned_results_stats_alone():
    """explain and verification apply rules compiled once for them (`compiled_for_checks`),
    not the driver's compiled rules, whose stats are the stats of a result already returned."""
    from ngrules.engine.compiled import compiled_for_checks

    ng.register_function("explode", lambda x: 1 / 0, arity=1)
    try:
        rs = rules("rule boom: Exp(x) => Exp(x) * explode(x)\n")
        p, q = leaves("p", "q")
        res = ng.rewrite([ng.exp(q)], rs)
        checking = compiled_for_checks(rs.rule("boom"))
        assert checking.apply(ng.exp(p)) is None  # the expression fails: counted, no match
    finally:
        ng.functions.FUNCTIONS.pop("explode", None)
    assert checking is compiled_for_checks(rs.rule("boom"))  # compiled once
    assert checking.stats.failures == 1 and res.stats["boom"].failures == 1


# -- explain -------------------------------------------------------------------------------------
def test_explain_points_at_the_first_failing_element():
    rs = rules("pass p\n\nrule neg_sum:  Sum(Negative(x)) => -Sum(x, reduction_axes=())\n")
    x = ng.placeholder([A, B], name="x")
    out = ng.sum(x * 2.0, reduction_axes=[B])
    text = str(ng.explain(rs.rule("neg_sum"), [out]))
    assert "`Negative(x)` at t.rules:3:20: found %3 Multiply(" in text


def test_explain_reports_a_false_guard():
    rs = rules("rule one: s @ Sum(x) if len(s.reduction_axes) == 2 => s")
    x = ng.placeholder([A, B], name="x")
    text = str(ng.explain(rs.rule("one"), [ng.sum(x, reduction_axes=[B])]))
    assert "`len(s.reduction_axes) == 2` at t.rules:1:25: the guard is false" in text


def _feeds(*names):
    rng = np.random.default_rng(0)
    return {n: rng.standard_normal(3).astype(np.float32) for n in names or ("p", "q")}


def test_rules_fire_at_a_rebuilt_node_that_is_already_built():
    rs = rules("rule one: x * 1 => x\nrule neg_neg: -(-x) => x")
    (p,) = leaves("p")
    built = ng.exp(-(-p))  # what the walk rebuilds is live already: it is not built again
    res = ng.rewrite([ng.exp(-(-(p * 1.0)))], rs)
    assert res.outputs == [ng.exp(p)] and [f.rule for f in res.trace] == ["one", "neg_neg"]
    assert res.trace[1].root is built.args[0]


def test_a_rebuilt_node_found_built_takes_the_provenance_of_the_node_it_stands_for():
    rs = rules("""
    pass first
    rule exp_log: Exp(Log(x)) => -x
    pass second
    rule mul_one: x * 1 => x
    rule neg_neg: -(-x) => x
    """)  # in the second pass, every rule at a Negative is `=> x`: tried before building
    p = ng.placeholder([A], name="p_provenance")  # a node no other test gives an origin
    built = -p
    assert built.origin is None
    res = ng.rewrite([ng.tanh(ng.exp(ng.log(p * 1.0)))], rs)
    assert res.outputs[0].args[0] is built and built.origin.name == "exp_log"


def test_provenance_survives_later_passes_that_rebuild_a_node():
    rs = rules("""
    pass first
    rule exp_log: Exp(Log(x)) => Tanh(x)
    pass second
    rule mul_one: x * 1 => x
    """)
    (p,) = leaves("p")
    res = ng.rewrite([ng.exp(ng.log(p * 1.0))], rs)  # the Tanh is rebuilt when its arg goes
    (out,) = res.outputs
    assert out.op == "Tanh" and out.args == (p,) and out.origin.name == "exp_log"
