"""Pending nodes (engine.pending): a node that a rule building its replacement could fuse away
is not rebuilt when its arguments change; it is matched through a view of their normal forms
and rebuilt only if needed. The results must be those of rebuilding everything at once."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ngrules as ng
from ngrules.engine import driver, pending
from ngrules.ir import graph

A = ng.make_axis(3, "A")

#: `1 * x` is removed (a rule returning a bound node: its op stays eager); the fusion builds
#: its replacement, so Negative and Exp below its root are lazy.
FUSE = """
rule one: x * 1 => x
rule fuse: Negative(Negative(Exp(t))) => Exp(t)
"""


def rules(text: str):
    return ng.parse_rules(text, "t.rules")


def chain(blocks: int):
    """h -> Sqrt(Negative(Negative(Exp(Tanh(h * 1))))), `blocks` times."""
    x = ng.placeholder([A], name="x_of_chain")  # a name no other test's graph shares: counts
    h = x  # of the nodes a rewrite builds must not depend on what other tests keep alive
    for _ in range(blocks):
        h = ng.sqrt(ng.negative(ng.negative(ng.exp(ng.tanh(h * 1.0)))))
    return x, h


@pytest.fixture
def created(monkeypatch):
    """Every node entered in the hash-consing table while the test runs (by `register`, or by
    `registered_on`, the walk's build-and-enter in one call)."""
    made: list = []
    real_register, real_registered_on = graph.register, graph.registered_on

    def register(node):
        made.append(node)
        return real_register(node)

    def registered_on(node, args, key):
        made.append(real_registered_on(node, args, key))
        return made[-1]

    for module in (graph, driver, pending):
        monkeypatch.setattr(module, "register", register)
    monkeypatch.setattr(driver, "registered_on", registered_on)
    return made


def test_the_inner_nodes_of_a_fused_subgraph_are_never_rebuilt(created):
    x, out = chain(4)
    rs = rules(FUSE)
    created.clear()  # from here: what the rewrite builds
    res = ng.rewrite([out], rs)
    assert ng.format_graph(res.outputs).count("Negative") == 0
    assert res.fired() == {"one": 4, "fuse": 4}
    # every block changed below (its `h * 1` went), yet no Negative was built again: the
    # nodes made are the survivors (Tanh, Exp, Sqrt per block), nothing else
    assert sorted({n.op for n in created}) == ["Exp", "Sqrt", "Tanh"]
    assert len(created) == 3 * 4
    v = np.linspace(-1.0, 1.0, 3, dtype=np.float32)
    (before,), (after,) = ng.execute([out], {x: v}), ng.execute(res.outputs, {x: v})
    np.testing.assert_allclose(after, before, rtol=1e-6)


def test_a_pending_node_that_rebuilds_to_a_bound_one_is_the_same_node():
    # z binds Negative(Exp(p * 1)) (pending: its argument changed) and Negative(Exp(p)); once
    # rebuilt they are one node, so the pattern's repeated z must match
    rs = rules("""
rule one: x * 1 => x
rule same: Negative(z) - Negative(z) => Negative(z) * 0
rule lazy_subtract: Exp(a - b) => Exp(a) / Exp(b)
""")
    (p,) = [ng.placeholder([A], name="p")]
    u, v = ng.negative(ng.exp(p * 1.0)), ng.negative(ng.exp(p))
    res = ng.rewrite([ng.negative(u) - ng.negative(v)], rs)
    assert res.fired() == {"one": 1, "same": 1}
    (root,) = [f.root for f in res.trace if f.rule == "same"]
    assert root.args[0] is root.args[1] is ng.negative(v)  # the trace shows the rebuilt root


def test_a_literal_under_a_pending_node_is_read_from_its_rebuilt_form():
    # Broadcast(c) becomes a known 2 only once c = 1 + 1 is folded, and stays pending, as do
    # the Multiply and the Negative above it (building rules have those ops inside): `fold2`
    # is matched through views, and its literal must read the Broadcast's rebuilt form
    rs = rules("""
rule fold: c: Constant + d: Constant => constant(value(c) + value(d), dtype=c.dtype)
rule fold2: Negative(y * 2) => y * -2
rule lazy_broadcast: e @ Exp(Broadcast(s)) => broadcast(Exp(s), e.axes)
rule lazy_negative: Exp(Negative(z)) => Reciprocal(Exp(z))
""")
    one = ng.constant(1.0)
    (p,) = [ng.placeholder([A], name="p")]
    two = ng.broadcast(one + one, [A])
    res = ng.rewrite([ng.negative(p * two)], rs)
    assert res.fired() == {"fold": 1, "fold2": 1}


SIMPLIFY = rules("""
rule one: x * 1 => x
rule neg_neg: -(-x) => x
""")


def simplify_chain(blocks: int):
    """h -> Tanh(-(1 * -((h * 1) * 2))): each block's negations cancel once `1 * ...` goes."""
    x = ng.placeholder([A], name="x_of_simplify_chain")  # a name no other test's graph shares
    h = x
    for _ in range(blocks):
        h = ng.tanh(-(1.0 * -((h * 1.0) * 2.0)))
    return x, h


def test_a_negation_that_a_bound_node_rule_cancels_is_never_built(created):
    # `-(-x) => x` has a Negative below its root: a Negative whose argument changed stays
    # pending, `1 * d => d` returns it unbuilt, and the outer Negative cancels it through
    # its view. Only the survivors are built: the Multiply by 2 and the Tanh of each block.
    x, out = simplify_chain(3)
    created.clear()
    res = ng.rewrite([out], SIMPLIFY)
    assert res.fired() == {"one": 6, "neg_neg": 3}
    assert sorted(n.op for n in created) == ["Multiply"] * 3 + ["Tanh"] * 3
    assert "Negative" not in ng.format_graph(res.outputs)
    v = np.linspace(-1.0, 1.0, 3, dtype=np.float32)
    (before,), (after,) = ng.execute([out], {x: v}), ng.execute(res.outputs, {x: v})
    np.testing.assert_allclose(after, before, rtol=1e-6)
    # the trace shows the negation `1 * d` returned, rebuilt when read: d on the new Multiply
    returned = [f for f in res.trace if f.replacements[0].op == "Negative"]
    assert [f.rule for f in returned] == ["one"] * 3
    for f in returned:
        (d,) = f.replacements
        assert d.args[0].op == "Multiply" and d in f.root.args


def test_a_pending_negation_a_user_needs_is_built_once():
    # the same chain with the outer negation gone: each pending Negative is needed, by a
    # Multiply whose `=> x` rule fails on its view (then both are built) and by a Tanh
    x = ng.placeholder([A], name="x_of_needed_negation")
    h = x
    for _ in range(3):
        h = ng.tanh((1.0 * -((h * 1.0) * 2.0)) * 3.0)
    res = ng.rewrite([h], SIMPLIFY)
    assert res.fired() == {"one": 6}
    assert ng.format_graph(res.outputs).count("Negative") == 3
    v = np.linspace(-1.0, 1.0, 3, dtype=np.float32)
    (before,), (after,) = ng.execute([h], {x: v}), ng.execute(res.outputs, {x: v})
    np.testing.assert_allclose(after, before, rtol=1e-6)


@given(st.integers(1, 6))
def test_a_fusion_that_builds_and_one_that_returns_a_bound_node_agree(blocks):
    # the fusion's replacement built (`=> Exp(t)`) and bound (`=> e`): different paths of the
    # walk (a building rule's match in the dispatch; `=> x` rules on a node's view)
    x, out = chain(blocks)
    lazy = ng.rewrite([out], rules(FUSE))
    eager = ng.rewrite([out], rules("rule one: x * 1 => x\nrule fuse: Negative(Negative(e)) => e"))
    assert lazy.outputs == eager.outputs
    assert lazy.fired() == eager.fired()
