"""The compiled matcher and the reference matcher find the same matches, in the same order."""

from unittest.mock import patch

import numpy as np
from helpers import expressions
from hypothesis import given
from hypothesis import strategies as st

import ngrules as ng
from ngrules.engine import matchgen
from ngrules.engine.match import all_matches, compile_pattern, match_ref
from ngrules.engine.matchgen import WRONG_TYPE, compile_returning
from ngrules.engine.semantics import same_type
from ngrules.ir.graph import toposort
from ngrules.lang.syntax import PLit, PNamed, POp, PVar

A = ng.make_axis(2, "A")
LEAVES = [ng.placeholder([A], name=n) for n in ("p", "q")] + [
    ng.constant(np.full(2, v, np.float32), [A]) for v in (0.0, 1.0)
]


def graphs():
    """A random expression over two placeholders and two constants (shared by hash-consing)."""
    return expressions(LEAVES, depth=3, stop_odds=3)


@st.composite
def patterns(draw, depth=3):
    """Random patterns: variables (some typed, some repeated), literals, ops, optional, named."""
    choice = draw(st.integers(0, 6 if depth else 2))
    if choice == 0:
        return PVar(draw(st.sampled_from(["x", "y", "_"])))
    if choice == 1:
        return PVar(draw(st.sampled_from(["x", "z"])), draw(st.sampled_from(["Exp", "constant"])))
    if choice == 2:
        return PLit(draw(st.sampled_from([0.0, 1.0, 2.0])))
    if choice == 3:
        return POp("Negative", (draw(patterns(depth=depth - 1)),), optional=draw(st.booleans()))
    if choice == 4:
        inner = draw(patterns(depth=depth - 1))
        return POp("Add", (PNamed("n", inner), PNamed("n", inner)))
    op = draw(st.sampled_from(["Add", "Multiply", "Subtract"]))
    return POp(op, (draw(patterns(depth=depth - 1)), draw(patterns(depth=depth - 1))))


@given(graphs(), patterns())
def test_compiled_and_reference_matchers_agree(graph, pattern):
    compiled = compile_pattern(pattern)
    for node in toposort([graph]):
        reference = list(match_ref(pattern, node, {}))
        assert all_matches(compiled, node) == reference


B = ng.make_axis(3, "B")
WIDER = ng.placeholder([A, B], name="w")  # another type than every other node


def _bound_by_matching(pattern) -> set[str]:
    """The names a match binds: a repeated `n @ p` is only compared with the first, so the
    names in its p are not bound there (the checker refuses such a rule; patterns() makes it)."""
    out: set[str] = set()
    stack = [pattern]
    while stack:  # the pattern's own order: left to right
        p = stack.pop()
        if isinstance(p, PNamed):
            if p.name not in out:
                out.add(p.name)
                stack.append(p.pattern)
        elif isinstance(p, PVar) and p.name != "_":
            out.add(p.name)
        elif isinstance(p, POp):
            stack.extend(reversed(p.args))
    return out


@given(graphs(), patterns(), st.booleans())
def test_a_returning_matcher_gives_the_first_reference_match(graph, pattern, wider):
    """`pattern => x` (no clauses) matches without a bindings dict or continuation: what it
    returns is the node the reference's first match binds to x, or WRONG_TYPE."""
    if wider:  # a match whose x cannot stand in for the root
        graph = ng.make_node("Add", (graph, ng.sum(WIDER, reduction_axes=[B])))
        pattern = POp("Add", (pattern, POp("Sum", (PVar("x"),))))
    for name in sorted(_bound_by_matching(pattern)):
        returning = compile_returning(pattern, name)
        for node in toposort([graph]):
            first = next(iter(match_ref(pattern, node, {})), None)
            expected = None if first is None else first[name]
            if expected is not None and not same_type(expected, node):
                expected = WRONG_TYPE
            assert returning(node, None, None) is expected


def test_a_returning_matcher_reports_a_replacement_of_another_type():
    root = ng.make_node("Add", (LEAVES[0], ng.sum(WIDER, reduction_axes=[B])))
    pattern = POp("Add", (PVar("y"), POp("Sum", (PVar("x"),))))
    assert compile_returning(pattern, "x")(root, None, None) is WRONG_TYPE
    assert compile_returning(pattern, "y")(root, None, None) is LEAVES[0]


@given(graphs())
def test_a_repeated_variable_never_binds_two_different_nodes(graph):
    pattern = POp("Add", (PVar("x"), PVar("x")))
    for node in toposort([graph]):
        for b in all_matches(compile_pattern(pattern), node):
            assert node.args[0] is node.args[1] is b["x"]


@given(graphs(), patterns())
def test_matchers_cut_into_several_functions_agree_with_the_reference(graph, pattern):
    with patch.object(matchgen, "MAX_INDENT", 3), patch.object(matchgen, "MAX_LOOPS", 1):
        compiled = compile_pattern(pattern, frozenset({"x"}))
    for node in toposort([graph]):
        b = {"x": LEAVES[0]}
        assert all_matches(compiled, node, b) == list(match_ref(pattern, node, b))
