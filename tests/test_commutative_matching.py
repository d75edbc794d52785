"""Commutative matching polynomial in practice (issue 37, F10): a balanced product tree of depth
5 whose guard is false was 2**31 matches (no end in 120 s). Operands alike and unread are tried
in one order; an operand's op is tested before any backtracking; and one match at one node
tries at most MAX_ORDERS orders, then stops with an error located at the rule."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_match_properties import graphs, patterns

import ngrules as ng
from ngrules.engine.match import all_matches, compile_pattern, match_ref
from ngrules.engine.semantics import MAX_ORDERS
from ngrules.ir.graph import toposort
from ngrules.lang.symmetry import one_order
from ngrules.lang.syntax import POp, PVar, walk

C = ng.make_axis(2, "C")


def _tree(depth: int, leaf):
    if depth == 0:
        return leaf()
    return _tree(depth - 1, leaf), _tree(depth - 1, leaf)


def _pattern_text(depth: int) -> tuple[str, int]:
    names = itertools.count()

    def text(t):
        return f"v{next(names)}" if isinstance(t, str) else f"({text(t[0])} * {text(t[1])})"

    return text(_tree(depth, lambda: "")), 2**depth


def _graph(depth: int):
    names = itertools.count()
    leaves = _tree(depth, lambda: ng.placeholder([C], name=f"p{next(names)}"))

    def build(t):
        return t if isinstance(t, ng.Node) else ng.multiply(build(t[0]), build(t[1]))

    return build(leaves)


@pytest.mark.parametrize("guard", ["size(r) > 1000000", "size(v0) > 1000000"])
def test_a_product_tree_of_depth_5_with_a_false_guard_finishes(guard):
    pattern, _ = _pattern_text(5)
    rules = ng.parse_rules(f"rule r: r @ {pattern} if {guard} => r", "t.rules")
    start = time.process_time()
    assert ng.rewrite([_graph(5)], rules).fired() == {}  # was no end in 120 s
    assert time.process_time() - start < 5
    ops = [p for p in walk(rules.rules[0].roots) if isinstance(p, POp)]
    reads_v0 = 5 if "v0" in guard else 0  # the ops above v0 keep both orders
    assert sum(not p.one_order for p in ops) == reads_v0


def test_a_guard_reading_every_name_ends_in_a_located_error():
    pattern, n = _pattern_text(5)
    # read every name, but evaluated cheaply (`and` stops at the first term): the 100,000
    # orders tried before the error are as many guards evaluated (8 s with the sum evaluated)
    guard = "size(r) < 0 and " + " + ".join(f"size(v{i})" for i in range(n)) + " > 1000000"
    rules = ng.parse_rules(f"pass p\nrule r: r @ {pattern} if {guard} => r", "t.rules")
    start = time.process_time()
    with pytest.raises(ng.RuleError, match=f"more than {MAX_ORDERS:,} argument orders") as err:
        ng.rewrite([_graph(5)], rules)
    assert time.process_time() - start < 20
    assert str(err.value).startswith("t.rules:2:")


def test_both_matchers_stop_at_the_same_bound():
    """A rule's pattern with every op trying both orders again (as if every name were read)."""
    marked = ng.parse_rules(f"rule r: {_pattern_text(5)[0]} => v0", "t.rules").rules[0].roots[0]
    pattern = _unmark(marked)
    with pytest.raises(ng.RuleError, match="argument orders") as ref:
        for _ in match_ref(pattern, _graph(5), {}):
            pass
    with pytest.raises(ng.RuleError, match="argument orders") as compiled:
        all_matches(compile_pattern(pattern), _graph(5))
    assert ref.value.span == compiled.value.span == marked.span


def _unmark(p):
    if isinstance(p, POp):
        return POp(p.op, tuple(_unmark(a) for a in p.args), p.optional, p.span)
    return p


def test_one_order_only_where_the_swap_cannot_matter():
    a, b = PVar("a"), PVar("b")
    exp_a, exp_b = POp("Exp", (a,)), POp("Exp", (b,))
    cases = {
        "alike, unread": ((POp("Multiply", (a, b)),), set(), True),
        "a guard reads one": ((POp("Multiply", (a, b)),), {"a"}, False),
        "one name twice": ((POp("Multiply", (a, a)),), set(), False),
        "shapes differ": ((POp("Multiply", (exp_a, b)),), set(), False),
        "alike ops": ((POp("Multiply", (exp_a, exp_b)),), set(), True),
        "not commutative": ((POp("Subtract", (a, b)),), set(), False),
        "another root names one": ((POp("Multiply", (a, b)), POp("Exp", (a,))), set(), False),
    }
    for name, (roots, read, expected) in cases.items():
        assert one_order(roots, read)[0].one_order is expected, name


@st.composite
def _marked(draw):
    """A random pattern with a random choice of its commutative ops marked `one_order`."""
    pattern = draw(patterns())

    def mark(p):
        if isinstance(p, POp):
            args = tuple(mark(a) for a in p.args)
            return POp(p.op, args, p.optional, p.span, one_order=draw(st.booleans()))
        return p

    return mark(pattern)


@given(graphs(), _marked())
def test_compiled_and_reference_matchers_agree_on_marked_patterns(graph, pattern):
    compiled = compile_pattern(pattern)
    for node in toposort([graph]):
        assert all_matches(compiled, node) == list(match_ref(pattern, node, {}))


def test_the_commutative_bench_runs_at_a_tiny_size(capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "bench" / "commutative.py"
    spec = importlib.util.spec_from_file_location("bench_commutative", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--copies", "1", "--repeat", "1"])
    out = capsys.readouterr().out
    assert out.count("k=8") == 4 and "own graph, guard reads leaf" in out
    names = itertools.count()
    tree = bench._shape(7, lambda: ng.placeholder([C], name=f"q{next(names)}"),
                        lambda name, a, b: bench._BUILD[name](a, b))
    no_guard = bench.rule(7, "root").rules[0].source.replace(" if size(r) > 1000000", "")
    fired = ng.rewrite([tree], ng.parse_rules(no_guard.replace("=> r", "=> -r"), "k.rules"))
    assert fired.fired() == {"r7": 1}  # rule k matches the tree of shape k
