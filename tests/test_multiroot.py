"""Multi-root rules: one round takes every non-overlapping match, so deep networks rewrite in
time linear in their size (counted in rounds and attempts, not timed)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import ngrules as ng
from ngrules.ir.graph import toposort

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_multiroot", ROOT / "bench/multiroot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rules():
    return ng.load_rules(ROOT / "rules")


def _work(bench, rules, layers: int) -> tuple[int, int]:
    res = bench.fuse(bench.deep_mlp(layers), rules)
    assert res.fired()["batchnorm_bprop"] == res.fired()["batchnorm_fprop"] == layers
    return res.rounds, sum(s.attempts for s in res.stats.values())


def test_fusing_a_deeper_network_takes_no_more_rounds_and_linear_attempts(bench, rules):
    """Each multi-root match once cost a round (a users index and a walk of the whole graph):
    quadratic in the depth. Now two rounds per multi-root pass whatever the depth, and the
    rules are tried a number of times linear in it: doubling the depth doubles the increase."""
    (r4, a4), (r8, a8), (r16, a16) = (_work(bench, rules, k) for k in (4, 8, 16))
    assert r4 == r8 == r16 == 4  # two multi-root passes: one round fuses, one finds none
    assert a16 - a8 <= 2.1 * (a8 - a4), (a4, a8, a16)


def test_the_bench_fuses_every_layer_and_reports_the_growth(bench, capsys):
    rows = bench.main(["--layers", "2,4", "--repeat", "1"])
    assert [r["layers"] for r in rows] == [2, 4] and rows[1]["nodes"] > rows[0]["nodes"]
    assert "4 vs 2 layers" in capsys.readouterr().out


PAIR = "pass p\nrule pair: e @ Exp(x), l @ Log(e) => (Negative(x), Tanh(x))"


def test_a_match_that_binds_a_root_taken_this_round_waits_for_the_next():
    x = ng.placeholder({"A": 3}, np.float64, name="x")
    first_log = ng.log(ng.exp(x))
    second_log = ng.log(ng.exp(first_log))  # its x is the first match's root
    res = ng.rewrite([second_log], ng.parse_rules(PAIR))
    assert res.fired() == {"pair": 2} and res.rounds == 3
    assert res.trace[1].roots[1].args[0].args[0] is ng.tanh(x)  # matched after the first fired
    assert res.outputs == [ng.tanh(ng.tanh(x))]


def test_matches_in_one_round_are_applied_together_and_compute_the_same():
    rules = ng.parse_rules("pass p\nrule pair: e @ Exp(x), l @ Log(x) => (Tanh(x), Sqrt(x))")
    x = ng.placeholder({"A": 3}, np.float64, name="x")
    y = x
    for _ in range(5):
        y = ng.exp(y) * ng.log(y)
    res = ng.rewrite([y], rules)
    assert res.fired() == {"pair": 5} and res.rounds == 2
    assert {n.op for n in toposort(res.outputs)} == {"Placeholder", "Tanh", "Sqrt", "Multiply"}
    want = np.linspace(0.5, 0.9, 3)
    for _ in range(5):
        want = np.tanh(want) * np.sqrt(want)
    np.testing.assert_allclose(ng.execute(res.outputs, {x: np.linspace(0.5, 0.9, 3)})[0], want)


def test_a_replacement_holding_its_own_root_keeps_it_and_fuel_stops_the_loop():
    rules = ng.parse_rules("pass p\nrule grow: e @ Exp(x), l @ Log(x) => (Tanh(e), l)")
    x = ng.placeholder({"A": 2}, np.float64, name="x")
    res = ng.rewrite([ng.exp(x), ng.log(x)], rules, fuel=3)
    assert res.stop == "fuel" and res.fired() == {"grow": 3}
    assert res.outputs[0] is ng.tanh(ng.tanh(ng.tanh(ng.exp(x))))


def test_every_node_of_a_result_is_the_one_hash_consing_returns(bench, rules):
    """Rebuilt nodes enter the table only if they stay: what stays must be the canonical node,
    and the input graph is untouched."""
    from ngrules.ir.graph import _lookup

    outputs = bench.deep_mlp(3)
    before = ng.format_graph(outputs)
    simplify = ng.parse_rules("pass s\nrule m: x * 1 => x\nrule a: x + 0 => x\nrule n: -(-x) => x")
    x = ng.placeholder({"A": 2}, np.float64, name="x")
    chain = ng.tanh(-(-(ng.exp(x) * 1.0 + 0.0)))
    for res in (bench.fuse(outputs, rules), ng.rewrite([ng.exp(chain) * 1.0], simplify)):
        assert all(_lookup(n._key) is n for n in toposort(res.outputs))
    assert ng.format_graph(outputs) == before


def test_a_rewrite_stopped_by_a_cycle_still_counts_the_rounds_it_ran():
    """The round that fired `pair` ran before the walk after it met the cycle."""
    rules = ng.parse_rules(
        "pass p\nrule pair: e @ Exp(x), l @ Log(x) => (Tanh(x), Sqrt(x))\n"
        "rule there: Tanh(x) => Sigmoid(x)\nrule back: Sigmoid(x) => Tanh(x)"
    )
    x = ng.placeholder({"A": 3}, np.float64, name="x")
    res = ng.rewrite([ng.exp(x) * ng.log(x)], rules)
    assert res.stop == "cycle" and res.fired()["pair"] == 1 and res.rounds == 1
