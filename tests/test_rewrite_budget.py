"""One memory and time budget for a whole rewrite (issue 37, item 1): greedy passes, folding and
saturation stop with one error naming the budget and its option, exit 2 from `apply`, and
nothing is changed or written. Each input is small; the budgets are made small to match."""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import numpy as np
import pytest

import ngrules as ng
from ngrules.budget import Budget, BudgetExceeded
from ngrules.cli.main import main
from ngrules.engine.folding import DEFAULT_LIMIT
from ngrules.engine.passes import as_ruleset
from ngrules.ir.graph import format_graph, toposort

A = ng.make_axis(4, "A")
K = ng.make_axis(4096, "K")

#: A rule whose every result matches it again: the graph grows by two nodes a rewrite, with no
#: cycle (each result is a new node) until the fuel, here made large.
GROWING = "pass grow\nrule grow: Exp(x) => Exp(-(-x))\n"

SATURATION_RULES = Path(__file__).resolve().parent.parent / "bench" / "saturation.rules"


def _growing_graph():
    x = ng.placeholder([A], name="x", dtype=np.float64)
    return [ng.exp(x)]


def _refused(call) -> tuple[str, float]:
    start = time.perf_counter()
    with pytest.raises(BudgetExceeded) as caught:
        call()
    return caught.value.message, time.perf_counter() - start


def test_a_rule_that_grows_is_stopped_by_the_memory_budget():
    outputs = _growing_graph()
    before = format_graph(outputs)
    rules = ng.parse_rules(GROWING)
    message, seconds = _refused(lambda: ng.rewrite(
        outputs, rules, fuel=10**8, budget=Budget(memory_bytes=1 << 20)))
    assert "past the rewrite's memory budget of 1048576 bytes" in message, message
    assert "--rewrite-memory" in message and "\n" not in message
    assert seconds < 2
    assert format_graph(outputs) == before  # the input graph is never changed
    # the default budget leaves the fuel to stop it, as before
    assert ng.rewrite(outputs, rules, fuel=2000).stop == "fuel"


def test_the_budget_is_public_and_shared_with_the_onnx_jobs():
    from ngrules.interop.onnx import OnnxError
    from ngrules.interop.onnx.budget import Budget as OnnxBudget
    from ngrules.interop.onnx.budget import BudgetExceeded as OnnxExceeded

    assert ng.Budget is Budget is OnnxBudget and ng.BudgetExceeded is BudgetExceeded
    assert issubclass(OnnxExceeded, BudgetExceeded) and issubclass(OnnxExceeded, OnnxError)
    assert Budget() == Budget(memory_bytes=1 << 31, seconds=120.0)


def test_a_rule_that_grows_is_stopped_by_the_time_budget():
    rules = ng.parse_rules(GROWING)
    message, seconds = _refused(lambda: ng.rewrite(
        _growing_graph(), rules, fuel=10**8, budget=Budget(seconds=0.2)))
    assert message.startswith("rewriting: past the rewrite's time budget of 0.2 s"), message
    assert "--rewrite-seconds" in message
    assert 0.2 <= seconds < 2


def test_a_walk_that_matches_for_long_and_rewrites_nothing_is_stopped_by_time():
    """Between rewrites is not enough: a guard that fails slowly at each of 4,000 nodes
    (a registered function that takes 1 ms) would take 4 s; the walk settles its budget
    every 256 nodes."""
    ng.register_function("slowly_false_test", lambda x: time.sleep(1e-3) or False, arity=1)
    try:
        rules = ng.parse_rules("pass p\nrule r: Exp(x) if slowly_false_test(x) => x\n")
        x = ng.placeholder([A], name="x", dtype=np.float64)
        chain = x
        for _ in range(4000):
            chain = ng.exp(chain)
        message, seconds = _refused(lambda: ng.rewrite([chain], rules,
                                                       budget=Budget(seconds=0.2)))
        assert message.startswith("matching in pass p: past the rewrite's time budget"), message
        assert seconds < 1.5
        assert ng.rewrite([ng.exp(x)], rules).stop == "fixpoint"
    finally:
        ng.functions.FUNCTIONS.pop("slowly_false_test", None)


def _many_folds(count: int):
    """count values of 4096 float64 elements, each folded (each far under the fold limit)."""
    return [ng.exp(ng.constant(np.full(4096, float(i)), [K], dtype=np.float64))
            for i in range(count)]


def test_many_folds_each_under_the_limit_are_refused_together():
    outputs = _many_folds(40)  # 40 x 32 kB
    assert K.length < DEFAULT_LIMIT  # each value far under the limit for one
    budget = Budget(memory_bytes=512 << 10)
    message, seconds = _refused(lambda: ng.rewrite(
        outputs, ng.parse_rules("pass p\nrule r: -(-x) => x\n"), passes=["fold_constants"],
        budget=budget))
    assert message.startswith("folding a Exp of 4096 elements would take 32768 bytes more, "
                              "past the rewrite's memory budget of 524288 bytes"), message
    assert seconds < 2
    # within the budget, the same graph folds to 40 constants, numpy's values
    done = ng.rewrite(outputs, ng.parse_rules("pass p\nrule r: -(-x) => x\n"),
                      passes=["fold_constants"], budget=Budget(memory_bytes=4 << 20))
    assert [o.op for o in done.outputs] == ["Constant"] * 40
    np.testing.assert_allclose(done.outputs[3].attrs["value"], np.exp(np.full(4096, 3.0)))
    # saturation folds under the same budget (a fold refused there is not a value skipped)
    message, _ = _refused(lambda: ng.saturate(
        outputs, ng.parse_rules("pass p\nrule r: -(-x) => x\n"), passes=["p", "fold_constants"],
        unverified=True, budget=budget))
    assert "past the rewrite's memory budget of 524288 bytes" in message, message


def test_a_saturation_that_grows_is_stopped_by_its_budget():
    every = ng.parse_rules(SATURATION_RULES.read_text(), str(SATURATION_RULES))
    growing = as_ruleset([r for p in ("growing", "ac") for r in every.passes[p]])
    leaves = [ng.placeholder([A], name=f"v{i}", dtype=np.float64) for i in range(10)]
    total = leaves[0]
    for leaf in leaves[1:]:
        total = total + leaf
    message, seconds = _refused(lambda: ng.saturate(
        [total], growing, unverified=True, max_enodes=10**6, seconds=60,
        budget=Budget(memory_bytes=256 << 10)))
    assert "past the rewrite's memory budget of 262144 bytes" in message, message
    assert "e-nodes" in message and seconds < 2
    message, seconds = _refused(lambda: ng.saturate(
        [total], growing, unverified=True, max_enodes=10**6, seconds=60,
        budget=Budget(seconds=0.3)))
    assert "past the rewrite's time budget of 0.3 s" in message, message
    assert seconds < 2


def _cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:  # a usage error
            code = e.code
    return code, out.getvalue(), err.getvalue()


def test_apply_refuses_with_exit_2_and_leaves_the_output_as_it_was(tmp_path):
    ng.save_graph(tmp_path / "g.json", _growing_graph())
    (tmp_path / "grow.rules").write_text(GROWING)
    out = tmp_path / "out.json"
    out.write_text("kept")
    code, _, err = _cli("apply", tmp_path / "g.json", "-o", out, "--rules",
                        tmp_path / "grow.rules", "--rewrite-memory", "1M", "-q")
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("ngrules: error: rewriting") and "--rewrite-memory" in err
    assert out.read_text() == "kept" and not (tmp_path / "out.npz").exists()
    code, _, err = _cli("apply", tmp_path / "g.json", "-o", tmp_path / "new.json", "--rules",
                        tmp_path / "grow.rules", "--rewrite-seconds", "0.01", "-q")
    assert code == 2 and "time budget of 0.01 s" in err and "--rewrite-seconds" in err, err
    assert not (tmp_path / "new.json").exists()
    code, _, err = _cli("apply", tmp_path / "g.json", "-o", out, "--rewrite-memory", "lots")
    assert code == 2 and "'lots' is not a positive number of bytes" in err


def test_apply_saturate_takes_the_same_budget(tmp_path):
    a, b = (ng.placeholder([A], name=n, dtype=np.float64) for n in "ab")
    ng.save_graph(tmp_path / "g.json", [ng.exp(a) * b])
    (tmp_path / "grow.rules").write_text(SATURATION_RULES.read_text())
    code, _, err = _cli("apply", tmp_path / "g.json", "-o", tmp_path / "out.json", "--rules",
                        tmp_path / "grow.rules", "--saturate", "--unverified", "--passes",
                        "growing", "--max-enodes", "1000000", "--rewrite-memory", "64K", "-q")
    assert code == 2 and err.count("\n") == 1 and "rewrite's memory budget of 65536" in err, err
    assert not (tmp_path / "out.json").exists()
    assert len(toposort([ng.exp(a) * b])) == 4
