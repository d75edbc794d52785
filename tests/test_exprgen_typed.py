"""Clauses generated for a matcher (`engine/fused.py`) know that a pattern name holds a node,
its `.axes` an Axes, its rank, `len` of its axes and its size an int: they read slots and
compare names with no type tests, and compute `size`/`value` in line. Called on random nodes,
the generated function decides as the interpreter does: a false guard gives None, a true one
the replacement, and whatever the interpreter refuses goes to it (`_SLOW`), never a value.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ngrules as ng
from ngrules.engine.compiled import CompiledRule
from ngrules.ir.symbolic import STAND_INS, stand_in
from ngrules.lang.expr import NotBoolean, evaluate, guard_truth
from ngrules.lang.parser import parse
from ngrules.lang.rules import Rule

FIXTURE = HealthCheck.function_scoped_fixture
A, B = ng.make_axis(3, "A"), ng.make_axis(4, "B")

#: Guards over the pattern's names x, y, z, c, in the forms the typed generator writes, and a
#: let (whose value is not known to be a node: the general path).
GUARDS = """
x.axes == y.axes
x.axes != y.axes and len(z.axes) > 0
x.rank == 0 or c.rank == 0
not (x.rank < y.rank)
x.axes == y.axes - z.axes
x.axes != y.axes - z.axes
value(c) * size(x) == size(y)
size(x) * value(c) == size(y)
size(x) * 2 == size(y) and value(c) == 2
value(c) > 1.5
value(c) != 0.5
len(x.axes) == y.rank
x.rank
size(x) == y.axes
""".strip().splitlines()
LETS = ["let a = x.axes\n    if a == y.axes", "let n = size(x)\n    if n * value(c) >= 8"]


def _leaves(symbolic: bool):
    axes = [[], [A], [B], [A, B], [B, A]]
    if symbolic:
        axes.append([ng.make_axis(stand_in("S_exprgen_typed"), "S"), A])
    nodes = [ng.placeholder(a, name=f"p{i}") for i, a in enumerate(axes)]
    nodes += [ng.constant(np.float32(v)) for v in (2.0, 0.5)]  # scalars with one value
    nodes.append(ng.constant(np.arange(3, dtype=np.float32), [A]))  # no one value
    nodes.append(ng.sum(nodes[3], reduction_axes=[B]))  # an op, not a leaf
    return nodes


def _clauses(text: str):
    """The generated clauses of `rule r: (x + y) * (z + c) if <text> => x`, with `_SLOW`
    (the interpreter's continuation) replaced by a marker, and the names in parameter order."""
    (decl,) = parse(f"rule r:\n    (x + y) * (z + c)\n    {text}\n    => x\n").decls
    rule = Rule("r", "p", decl.roots, decl.clauses, decl.replacement)  # unchecked: any guard
    compiled = CompiledRule(rule)
    clauses = compiled.fused.__globals__["_CL"]
    clauses.__globals__["_SLOW"] = lambda bindings: "interpreter"
    names = [clauses.__globals__[f"_K{i}"] for i in range(4)]
    return rule, clauses, names


def _interpreted(rule, bindings):
    """True/False as the interpreter decides the guards (lets bound; an integer is true when
    nonzero), or "interpreter" when it raises or a guard is neither a boolean nor an integer."""
    env = dict(bindings)
    try:
        for clause in rule.clauses:
            value = evaluate(clause.expr, env)
            if hasattr(clause, "name"):
                env[clause.name] = value
            elif not guard_truth(value):
                return False
    except (ng.NgrulesError, NotBoolean):
        return "interpreter"
    return True


@pytest.fixture(params=["static", "symbolic"])
def leaves(request, monkeypatch):
    """The nodes to bind; "static": no symbolic length in the process (the in-line size)."""
    if request.param == "static":
        for key in list(STAND_INS):
            monkeypatch.delitem(STAND_INS, key)
    return _leaves(request.param == "symbolic")


@pytest.mark.parametrize("text", [f"if {g}" for g in GUARDS] + LETS)
@settings(max_examples=40, deadline=None, suppress_health_check=[FIXTURE])
@given(data=st.data())
def test_generated_clauses_decide_as_the_interpreter(leaves, text, data):
    """(The leaves are drawn from, never changed: the fixture may serve every example.)"""
    rule, clauses, names = _clauses(text)
    bound = {n: data.draw(st.sampled_from(leaves), label=n) for n in names}
    expected = _interpreted(rule, bound)
    got = clauses(bound["x"], {}, *[bound[n] for n in names])
    if expected is True:
        assert got == ((bound["x"],), (bound["x"],), ())
    else:
        assert got == (None if expected is False else "interpreter")


def test_a_guard_on_a_let_keeps_its_type_tests():
    """A let's value may be anything: its equality keeps the Axes test and `not not`."""
    _, clauses, _ = _clauses(LETS[0])
    assert "is _Axes" in clauses.source and "_truth" in clauses.source


def test_typed_guards_have_no_type_tests():
    _, clauses, _ = _clauses("if x.axes == y.axes - z.axes and len(x.axes) > 0")
    assert "_Node" not in clauses.source.split("values =")[0]
    assert "_Axes" not in clauses.source and "not not" not in clauses.source


def test_a_value_not_yet_computed_is_computed_once():
    """`value(c)` in line reads the node's cached value, calling `value` the first time."""
    _, clauses, names = _clauses("if value(c) == 3")
    c = ng.constant(np.full(3, 3.0, np.float32), [A])  # a new node: its value not asked yet
    x = ng.placeholder([A], name="x3")
    bound = dict(zip(names, (x, x, x, x))) | {"c": c}
    assert clauses(x, {}, *[bound[n] for n in names]) == ((x,), (x,), ())
    assert c._scalar == 3.0

