"""Extraction from an e-graph (issue 36): shared subgraphs counted once (z3), never a cycle,
greedy when z3 is not asked for or the e-graph is large; the cost model's FLOPs and bytes.

The e-graphs are built by hand: `union` records whatever the test says is equal (extraction
only reads the classes), so the costs, not the values, decide what is chosen.
"""

from __future__ import annotations

import numpy as np
import pytest

import ngrules as ng
from ngrules.saturation import extract as ex
from ngrules.saturation.costs import bytes_moved, flops, graph_cost, node_cost
from ngrules.saturation.egraph import EGraph

A = ng.make_axis(length=4, name="A")


@pytest.fixture(autouse=True)
def _work_only(monkeypatch):
    """These e-graphs weigh FLOPs and bytes: a per-node cost of 1 (the model's launch cost,
    `PER_NODE`, would make the node counts decide)."""
    from ngrules.saturation import costs

    monkeypatch.setattr(costs, "PER_NODE", 1.0)


def _shared_or_own():
    """Two roots, each either Add(S, leaf) over one shared S = Exp(x), or three negations of
    its own leaf: the negations are cheaper per tree, the shared S cheaper as a DAG."""
    x, y, z = (ng.placeholder([A], name=n) for n in "xyz")
    eg = EGraph()
    s = ng.exp(x)
    roots = []
    for leaf in (y, z):
        shared = eg.add(s + leaf)
        own = eg.add(-(-(-leaf)))
        eg.union(shared, own)
        roots.append(shared)
    eg.union(eg.add(s), eg.add(-(s + y)))  # S also over root 1: a cycle not to take
    eg.rebuild()
    return eg, roots, s


def test_tree_costs_favour_the_copies_and_z3_finds_the_shared_subgraph(monkeypatch):
    from ngrules.saturation import shared

    eg, roots, s = _shared_or_own()
    monkeypatch.setattr(shared, "shared_choice", lambda *a, **k: None)  # tree costs only
    monkeypatch.setattr(ex, "shared_choice", lambda *a, **k: None)
    greedy = ex.extract(eg, roots, use_z3=False)
    exact = ex.extract(eg, roots, use_z3=True)
    assert greedy.method == "greedy" and exact.method == "z3"
    assert exact.cost < greedy.cost
    outputs, _ = ex.build(eg, exact.choice, roots)
    assert all(o.op == "Add" and s in o.args for o in outputs)  # one Exp, used twice
    assert ex.dag_cost(eg, exact.choice, roots) == pytest.approx(graph_cost(outputs))
    outputs, _ = ex.build(eg, greedy.choice, roots)
    assert all(o.op == "Negative" for o in outputs)


def test_without_z3_a_value_read_by_two_classes_is_shared():
    """Tree costs pay the shared Exp once per root; the choice that shares an argument's cost
    among its readers finds the DAG optimum z3 finds, without z3."""
    eg, roots, s = _shared_or_own()
    tree = ex.greedy(eg, eg.reachable(roots))
    assert all(tree[eg.find(r)].op == "Negative" for r in roots)
    found = ex.extract(eg, roots, use_z3=False)
    exact = ex.extract(eg, roots, use_z3=True)
    assert found.cost == pytest.approx(exact.cost) and "shared" in found.note
    outputs, _ = ex.build(eg, found.choice, roots)
    assert all(o.op == "Add" and s in o.args for o in outputs)


def test_a_slice_of_a_slice_becomes_a_slice_of_the_merged_value():
    """`reuse` re-chooses within the chosen graph: of two equal-cost slices, the one reading
    the earlier value, so the chain between goes."""
    from ngrules.saturation.shared import reuse

    b = ng.make_axis(length=8, name="B")
    x = ng.placeholder([b], name="x")
    axes = {n: ng.make_axis(length=k, name=n) for n, k in (("H", 4), ("Q", 2))}
    half = ng.make_node("Slice", (x,), position=0, start=0, stop=4, axis=axes["H"])
    chained = ng.make_node("Slice", (half,), position=0, start=0, stop=2, axis=axes["Q"])
    direct = ng.make_node("Slice", (x,), position=0, start=0, stop=2, axis=axes["Q"])
    other = ng.make_node("Slice", (x,), position=0, start=4, stop=8, axis=axes["H"])
    eg = EGraph()
    roots = [eg.add(ng.exp(chained)), eg.add(ng.exp(other))]
    eg.union(eg.add(chained), eg.add(direct))
    eg.rebuild()
    choice = ex.greedy(eg, eg.reachable(roots))
    choice[eg.find(eg.add(chained))] = next(e for e in eg.classes[eg.find(eg.add(chained))]
                                            if e.template.args[0].op == "Slice")
    better = reuse(eg, choice, roots)
    outputs, _ = ex.build(eg, better, roots)
    assert "Slice" not in [a.op for n in ng.toposort(outputs) if n.op == "Slice" for a in n.args]
    assert ex.dag_cost(eg, better, roots) < ex.dag_cost(eg, choice, roots)


def test_no_extraction_takes_a_cycle():
    eg, roots, _ = _shared_or_own()
    x = ng.placeholder([A], name="x")
    eg.union(eg.add(x), eg.add(x * 1.0))  # x's class holds a term over itself
    eg.rebuild()
    for use_z3 in (False, True):
        found = ex.extract(eg, roots, use_z3=use_z3)
        outputs, _ = ex.build(eg, found.choice, roots)  # would not end on a cycle
        assert len(ng.toposort(outputs)) < 20


def test_large_e_graphs_are_extracted_greedily_and_say_so(monkeypatch):
    eg, roots, _ = _shared_or_own()
    monkeypatch.setattr(ex, "Z3_LIMIT", 3)
    found = ex.extract(eg, roots)
    assert found.method == "greedy" and "z3 not tried" in found.note


def test_without_z3_the_greedy_choice_stands(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "z3", None)  # import z3 raises ImportError
    eg, roots, _ = _shared_or_own()
    found = ex.extract(eg, roots, use_z3=True)
    assert found.method == "greedy" and "not installed" in found.note


def test_the_cost_model_counts_flops_and_bytes():
    M, K, N = (ng.make_axis(length=n, name=c) for c, n in (("M", 3), ("K", 5), ("N", 7)))
    a = ng.placeholder([M, K])
    b = ng.placeholder([K, N])
    d = ng.dot(a, b)
    assert flops(d) == 2 * 3 * 5 * 7
    assert bytes_moved(d) == 4 * (15 + 35 + 21)  # float32 in and out
    e = ng.exp(a)
    assert flops(e) == 8 * 15 and bytes_moved(e) == 4 * 30
    v = ng.broadcast(ng.placeholder([K]), [M, K])
    assert flops(v) == 0 and bytes_moved(v) == 0 and node_cost(v) > 0  # a view
    shared = e + e
    assert graph_cost([shared]) == node_cost(a) + node_cost(e) + node_cost(shared)
    assert np.isfinite(graph_cost([d]))


def test_the_greedy_choice_shares_a_multi_output_op_among_its_outputs():
    """Three outputs of one fused op against three separate computations: by tree cost each
    Output pays the whole op, so the plain greedy choice takes the copies; the choice that
    splits the op's cost among its outputs takes the fused op, and its DAG cost is lower."""
    c, n = ng.make_axis(4, "C"), ng.make_axis(64, "N")
    x = ng.placeholder([c, n], name="x")
    gamma, beta = (ng.placeholder([c], name=k) for k in ("gamma", "beta"))
    fused = ng.batchnorm_fprop(x, gamma, beta, 1e-3)
    own = [-x, ng.sum(x, reduction_axes=[n]), ng.max(x, reduction_axes=[n])]
    assert all(graph_cost([o]) < graph_cost([fused[0]]) for o in own)  # each cheaper alone
    assert graph_cost(own) > graph_cost(fused)  # all three dearer than the op they share
    eg = EGraph()
    roots = []
    for i, alone in enumerate(own):
        out = fused[i]
        assert out.axes == alone.axes  # e-classes need one type
        assert eg.union(eg.add(out), eg.add(alone))
        roots.append(eg.find(eg.add(out)))
    eg.rebuild()
    plain = ex.greedy(eg, eg.reachable(roots))
    split = ex.greedy(eg, eg.reachable(roots), split=True)
    assert all(plain[r].op != "Output" for r in roots)
    assert all(split[r].op == "Output" for r in roots) and ex.acyclic(split, roots)
    assert ex.dag_cost(eg, split, roots) < ex.dag_cost(eg, plain, roots)
    found = ex.extract(eg, roots, use_z3=False)
    assert found.choice == split and "split among their outputs" in found.note
