"""Every pattern the checker accepts compiles and matches (issue 11, item 2): deep nesting
once crashed the generated matcher with Python's own nesting limits."""

from __future__ import annotations

import pytest

import ngrules as ng
from ngrules.engine.match import all_matches, compile_pattern, match_ref
from ngrules.engine.matchgen import generate
from ngrules.lang.checker import MAX_DEPTH

C = ng.make_axis(2, "C")
X, Y = ng.placeholder([C], name="x"), ng.placeholder([C], name="y")


def _chain(build, depth: int, leaf=X):
    node = leaf
    for i in range(depth):
        node = build(node, i)
    return node


DEEP = {
    "product of 22 variables": (
        " * ".join(f"v{i}" for i in range(22)),
        _chain(lambda n, i: ng.multiply(n, ng.placeholder([C], name=f"p{i}")), 21),
    ),
    "21 nested Adds": (
        "Add(" * 21 + "x" + ", y)" * 21,
        _chain(lambda n, i: ng.add(Y, n) if i % 2 else ng.add(n, Y), 21),
    ),
    "21 optional wrappers": ("Negative?(" * 21 + "Exp(x)" + ")" * 21, ng.negative(ng.exp(X))),
    f"Exp nested {MAX_DEPTH - 2} deep": (
        "Exp(" * (MAX_DEPTH - 2) + "x" + ")" * (MAX_DEPTH - 2),
        _chain(lambda n, i: ng.exp(n), MAX_DEPTH - 2),
    ),
}


@pytest.mark.parametrize("name", DEEP)
def test_a_deep_pattern_compiles_matches_and_rewrites(name):
    pattern_text, graph = DEEP[name]
    rules = ng.parse_rules(f"rule deep: r @ {pattern_text} => r", "deep.rules")
    pattern = rules.rules[0].roots[0]
    source, _ = generate(pattern)
    assert max(len(line) - len(line.lstrip()) for line in source.splitlines()) <= 4 * 50
    found = all_matches(compile_pattern(pattern), graph)
    assert found and found == list(match_ref(pattern, graph, {}))
    result = ng.rewrite([graph], rules)
    assert result.fired() == {"deep": 1} and result.outputs == [graph]
    assert "matches at 0 node" not in str(ng.explain(rules.rules[0], [graph]))


@pytest.mark.parametrize("name", ["21 nested Adds", f"Exp nested {MAX_DEPTH - 2} deep"])
def test_a_deep_pattern_that_returns_a_variable_rewrites(name):
    """`Exp(...39 deep...(x)) => x` passed `check`, then the matcher split into several
    functions lost the root `node` its last line compares x with (a NameError in `apply`)."""
    pattern_text, graph = DEEP[name]
    rules = ng.parse_rules(f"rule deep: {pattern_text} => x", "deep.rules")
    result = ng.rewrite([graph], rules)
    assert result.fired() == {"deep": 1} and result.outputs == [X]
