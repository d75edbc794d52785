"""TASO's and Tensat's rules (bench/taso_tensat.rules) and one graph of their evaluation
(bench/peer_graphs.py) at a tiny size: the library loads and checks, the graph saturates, and
the extracted graph computes what the input does (issue 36, item 4)."""

import sys
from pathlib import Path

import numpy as np
import pytest

import ngrules as ng

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
pytest.importorskip("onnx")  # the graphs are ONNX models (the [onnx] extra)


@pytest.fixture(scope="module")
def peers():
    import saturate_peers  # bench/saturate_peers.py

    return saturate_peers


def test_the_peer_rules_load_and_check(peers):
    rules = ng.load_rules(peers.PEER_RULES)
    assert len(rules.rules) == 40
    assert set(peers.PEER_PASSES) <= set(rules.passes)
    assert {r.name for r in rules.passes["tensat_multi"]} == {"merge_matmul", "merge_relu"}
    assert all(len(r.roots) == 2 for r in rules.passes["tensat_multi"])


def test_a_tiny_nasrnn_saturates_to_merged_products_and_the_same_values(peers):
    import peer_graphs  # bench/peer_graphs.py

    from ngrules.interop.onnx.importer import from_onnx

    outputs = from_onnx(peer_graphs.nasrnn(steps=1, hidden=8))
    rules, passes, left_out = peers.rule_set(None)
    assert left_out == []
    result = ng.saturate(outputs, rules, passes=passes, unverified=True, use_z3=False)
    assert result.stop == "saturated"
    assert result.applied.get("merge_matmul", 0) >= 7  # the products of one operand merged
    ops = [n.op for n in ng.toposort(outputs)]
    assert ops.count("MatMul") == 16
    ops = [n.op for n in ng.toposort(result.outputs)]
    assert ops.count("Dot") + ops.count("MatMul") <= 2 and result.cost_after < result.cost_before
    rng = np.random.default_rng(0)
    feeds = {p: rng.standard_normal(p.axes.lengths).astype(np.float32)
             for p in ng.toposort(outputs) if p.op == "Placeholder"}
    want = ng.execute(outputs, feeds)
    got = ng.execute(result.outputs, feeds, ignore_unused=True)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
