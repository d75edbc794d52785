"""The generated dispatch (`engine/dispatch.py`) against the loop it replaces: the same graph,
the same firings in the same order, the same statistics, on random graphs and rule sets.

The loop still runs when attempts are timed (`rewrite(..., stats=True)`), so it is the
reference here: the two paths differ only in how the rules at a node are tried.
"""

import numpy as np
from helpers import expressions
from hypothesis import given, settings
from hypothesis import strategies as st

import ngrules as ng
from ngrules.engine.dispatch import first_match
from ngrules.ir.graph import format_graph

A = ng.make_axis(3, "A")
LEAVES = [ng.placeholder([A], name=n) for n in ("p", "q")] + [
    ng.constant(np.full(3, v, np.float32), [A]) for v in (0.0, 1.0, 2.0)
]

#: Rules of every kind the dispatch tries: `=> x` (returning matchers), rules with guards and
#: lets, rules building nodes (which makes their inner ops pending), a rule whose result is
#: rewritten again, commutative and optional patterns.
RULES = [
    "rule mul_one: x * 1 => x",
    "rule add_zero: x + 0 => x",
    "rule neg_neg: -(-x) => x",
    "rule sub_self: x - x => 0",
    "rule mul_zero: x * 0 => 0",
    "rule exp_neg: Exp(-x) => Reciprocal(Exp(x))",
    "rule twice: x + x => x * 2",
    "rule guarded:\n    x * y\n    if x.op == \"Exp\" and y.op != \"Exp\"\n    => y * x",
    "rule fma_like:\n    (a * b) + c\n    if a.op == \"Placeholder\" and c.op == \"Negative\"\n"
    "    => c + (b * a)",
    "rule let_size:\n    x - y\n    let n = size(x)\n    if n == 3 and y.op == \"Exp\"\n"
    "    => -(y - x)",
    "rule opt_neg:\n    Negative?(Exp(x)) + y\n    if y.op == \"Constant\"\n    => y + Exp(x)",
    # fails to evaluate where y holds no known value: the match is rejected and counted
    "rule known_two:\n    x - y\n    if value(y) == 2\n    => x + (-y)",
]


def graphs():
    """A random expression over the leaves (shared by hash-consing)."""
    return expressions(LEAVES, depth=4, stop_odds=4)


def _summary(result):
    return (
        result.stop,
        format_graph(result.outputs) if result.stop == "fixpoint" else None,
        # a root replaced before it was interned is rebuilt when the trace is read: compared
        # by structure (two reads give two equal nodes)
        [(f.rule, format_graph(list(f.roots)), f.replacements) for f in result.trace],
        {name: (s.attempts, s.matches, s.failures) for name, s in result.stats.items()},
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(graphs(), min_size=1, max_size=3),
    st.lists(st.sampled_from(RULES), min_size=1, max_size=6, unique=True),
    st.sampled_from([None, 3, 20]),
    st.booleans(),
)
def test_generated_dispatch_and_the_reference_loop_agree(outputs, rules, fuel, checked):
    ruleset = ng.parse_rules("pass p\n" + "\n".join(rules) + "\n", "t.rules")
    # Attempts depend on which nodes exist already (a rebuilt node found in the hash-consing
    # table is not tried again): each path runs once first, so both start from the same table.
    for timed in (False, True):
        ng.rewrite(outputs, ruleset, fuel=fuel, checked=checked, stats=timed)
    fast = ng.rewrite(outputs, ruleset, fuel=fuel, checked=checked)
    loop = ng.rewrite(outputs, ruleset, fuel=fuel, checked=checked, stats=True)  # the loop
    assert _summary(fast) == _summary(loop)


def test_one_function_per_list_of_rules():
    ruleset = ng.parse_rules("pass p\n" + "\n".join(RULES[:3]) + "\n", "t.rules")
    x = LEAVES[0]
    ng.rewrite([-(-(x * 1.0))], ruleset)
    from ngrules.engine.driver import _compile

    compiled = [_compile(r) for r in ruleset.passes["p"]]
    assert first_match(compiled) is first_match(list(compiled))
    source = first_match(compiled).source
    # `=> x`: the matchers are pasted in (their locals prefixed), none is called, and a match
    # returns the bound node without going through `apply`
    assert "m0_" in source and "m2_" in source and "M0(" not in source
    assert "return R0, ((node,), (m0_" in source


def test_a_root_replaced_before_it_is_built_is_traced_as_rebuilt():
    """`(-(-p)) * 1`: the Multiply's argument changed, and `x * 1 => x` replaces it on its view
    without building it; the trace still shows the Multiply on the rewritten argument."""
    ruleset = ng.parse_rules("pass p\n" + "\n".join(RULES[:3]) + "\n", "t.rules")
    p = LEAVES[0]
    for stats in (False, True):  # the view (generated dispatch) and the loop (built first)
        result = ng.rewrite([(-(-p)) * 1.0], ruleset, stats=stats)
        assert result.outputs == [p]
        neg, mul = result.trace
        assert (neg.rule, mul.rule) == ("neg_neg", "mul_one")
        assert mul.root.op == "Multiply" and p in mul.root.args and mul.replacements == (p,)


def test_a_pasted_rule_records_its_new_nodes_with_their_origin():
    """A fused rule's match is recorded in the dispatch itself (`run.record` only when the run
    is checked): the same firing either way, its new nodes marked as the rule's."""
    ruleset = ng.parse_rules("pass p\nrule exp_neg: Exp(-x) => Reciprocal(Exp(x))\n", "t.rules")
    (rule,) = ruleset.rules
    firings = []
    for checked in (False, True):
        q = ng.placeholder([A], name=f"q_pasted_{checked}")  # a fresh leaf: all built is new
        (firing,) = ng.rewrite([ng.exp(-q)], ruleset, checked=checked).trace
        assert sorted(n.op for n in firing.new_nodes) == ["Exp", "Reciprocal"]
        assert all(n.origin is rule for n in firing.new_nodes)
        assert firing.replacements == (firing.new_nodes[-1],) and firing.roots[0].op == "Exp"
        firings.append((firing.rule, firing.location, firing.pass_name))
    assert firings[0] == firings[1]
