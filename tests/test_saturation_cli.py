"""`ngrules apply --saturate` (issue 36) and saturation of the project's example models with
the shipped rules: the extracted graph computes what the input does and costs no more than
the greedy `cpu` pipeline's output."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import ngrules as ng
from ngrules.cli.main import main
from ngrules.saturation.costs import graph_cost

RULES = Path(__file__).resolve().parent.parent / "bench" / "saturation.rules"


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.fixture
def files(tmp_path):
    a = ng.make_axis(4, "A")
    x, y, z = (ng.placeholder([a], name=n, dtype=np.float64) for n in "xyz")
    ng.save_graph(tmp_path / "g.json", [x * (y + z) - x * z, ng.exp(z)])
    return tmp_path


def test_apply_saturate_writes_the_extracted_graph_and_reports(files):
    r = run("apply", files / "g.json", "-o", files / "out.json", "--rules", RULES,
            "--passes", "algebra", "growing", "--saturate", "--unverified", "--max-enodes", "60",
            "--trace", "--explain", "--egraph", files / "eg.dot")
    assert r.returncode == 1, r.stderr  # `grow` grows forever: the e-node limit stops it
    assert "stopped: enodes (stopped at the e-node limit" in r.stdout
    assert "extracted by z3" in r.stdout and "nodes made by rules: distribute 1" in r.stdout
    assert "--unverified" in r.stderr and "grow (" in r.stderr
    assert "passes: algebra, growing (no pipeline) (saturated together)" in r.stderr
    assert re.search(r"Multiply +\[A:4\] +<- distribute \(.*saturation.rules:\d+\)", r.stdout)
    assert re.search(r"changed: Multiply .*\n +rules: distribute \(.*\) -> cancel", r.stdout)
    assert "e-graph picture: " in r.stdout
    dot = (files / "eg.dot").read_text()
    assert dot.startswith('digraph "eg"') and "\\ngrow" in dot  # e-nodes grow built
    before = ng.load_graph(files / "g.json")
    after = ng.load_graph(files / "out.json")
    assert [n.op for n in after] == ["Multiply", "Exp"]
    feeds = {n: np.linspace(-1, 1, 4) + i for i, n in enumerate("xyz")}
    for b, a in zip(ng.execute(before, feeds), ng.execute(after, feeds, ignore_unused=True)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_apply_saturate_without_rules_that_enter_says_which_were_left_out(files):
    (files / "wrong.rules").write_text("pass p\nrule cancel_ieee: (a + b) - b => a\n")
    r = run("apply", files / "g.json", "-o", files / "out.json", "--rules",
            files / "wrong.rules", "--saturate")
    assert r.returncode == 0, r.stderr
    assert "left out     cancel_ieee" in r.stdout and "verdict wrong" in r.stdout
    assert "saturate: verifying 1/1 cancel_ieee" in r.stderr
    assert "stopped: saturated" in r.stdout


def test_bad_limits_are_usage_errors(files):
    r = run("apply", files / "g.json", "-o", files / "out.json", "--saturate",
            "--saturate-seconds", "0")
    assert r.returncode == 2 and "positive number of seconds" in r.stderr


@pytest.mark.parametrize("name", ["cnn"])
def test_example_models_saturated_with_the_shipped_rules(name):
    pytest.importorskip("onnx")
    from ngrules.interop.onnx import examples
    from ngrules.interop.onnx.importer import from_onnx

    outputs = from_onnx(getattr(examples, name)(), lengths={"N": 2})
    library = ng.load_library()
    greedy = ng.rewrite(outputs, library, pipeline="cpu")
    result = ng.saturate(outputs, library, pipeline="cpu", unverified=True)
    assert result.stop == "saturated"
    assert result.applied.get("fold_constants", 0) > 0  # the pipeline's built-in pass too
    # never worse than the input or the greedy pipeline (the input's ONNX ops are composites,
    # costed as their bodies' work: the greedy lowering need not be cheaper than them)
    assert result.cost_after <= min(graph_cost(greedy.outputs), result.cost_before)
    rng = np.random.default_rng(0)
    feeds = {p: rng.standard_normal(p.axes.lengths).astype(np.float32)
             for p in ng.toposort(outputs) if p.op == "Placeholder"}
    for want, got in zip(ng.execute(outputs, feeds), ng.execute(result.outputs, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_multi_root_fusions_enter_through_the_best_graph():
    """Batchnorm's forward and backward fusions are multi-root rules: matched on the current
    best graph each iteration, joined in the e-graph, and chosen by the DAG-exact extraction
    (one fused op read through several outputs is counted once)."""
    from ngrules.ir.layers import batchnorm, leaky_relu

    c, h, n = ng.make_axis(4, "C"), ng.make_axis(3, "H"), ng.make_axis(8, "N")
    x = ng.placeholder([c, n], np.float32, name="x")
    w = ng.placeholder([h, c], np.float32, name="w")
    gamma, beta = (ng.placeholder([h], np.float32, name=k) for k in ("gamma", "beta"))
    a = leaky_relu(batchnorm(ng.dot(w, x), gamma, beta, 1e-3), 0.1)
    cost = ng.sum(a * a, out_axes=())
    outputs = [cost] + [ng.deriv(cost, p) for p in (w, gamma, beta)]
    library = ng.load_library()
    greedy = ng.rewrite(outputs, library, pipeline="cpu")
    result = ng.saturate(outputs, library, pipeline="cpu", unverified=True)
    assert result.applied["batchnorm_bprop"] == result.applied["batchnorm_fprop"] == 1
    ops = {node.op for node in ng.toposort(result.outputs)}
    assert {"BatchnormFprop", "BatchnormBprop"} <= ops
    assert result.extraction.method == "z3"
    assert result.cost_after <= graph_cost(greedy.outputs)
    rng = np.random.default_rng(0)
    feeds = {p: rng.standard_normal(p.axes.lengths).astype(np.float32) for p in (x, w, gamma,
                                                                               beta)}
    for want, got in zip(ng.execute(outputs, feeds), ng.execute(result.outputs, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def test_an_e_graph_too_large_to_draw_is_an_error_before_anything_is_written(files):
    r = run("apply", files / "g.json", "-o", files / "out.json", "--rules", RULES,
            "--passes", "algebra", "growing", "--saturate", "--unverified", "--max-enodes", "400",
            "--egraph", files / "eg.dot")
    assert r.returncode == 2 and "pictures are drawn up to 300" in r.stderr
    assert not (files / "out.json").exists() and not (files / "eg.dot").exists()


def test_saturation_options_without_saturate_are_an_error(files):
    r = run("apply", files / "g.json", "-o", files / "out.json", "--explain", "--unverified")
    assert r.returncode == 2
    assert "--unverified, --explain: only meaningful with --saturate" in r.stderr
    assert not (files / "out.json").exists()


def test_canonical_layout_enters_the_e_graph_beside_the_input(scratch_ops):
    """An imported SiLU reordered operand by operand matches `x * Sigmoid(x)` only once the
    built-in pass `canonical_layout` gathers its views; saturation adds that form beside the
    input and extracts the fused op."""
    rules = ng.parse_rules("op SatSilu(x) = x * Sigmoid(x)\npass fuse\n"
                           "rule silu: x * Sigmoid(x) => SatSilu(x)\n", "silu.rules")
    n, h, c = ng.make_axis(2, "N"), ng.make_axis(3, "H"), ng.make_axis(4, "C")
    d = ng.placeholder([n, h, c], name="d")
    order = [n, c, h]
    g = ng.axes_with_order(d, order) * ng.axes_with_order(ng.sigmoid(d), order)
    verdicts = {"silu": "verified"}
    plain = ng.saturate([g], rules, passes=["fuse"], verdicts=verdicts)
    assert "SatSilu" not in {x.op for x in ng.toposort(plain.outputs)}
    result = ng.saturate([g], rules, passes=["canonical_layout", "fuse"], verdicts=verdicts)
    assert "SatSilu" in {x.op for x in ng.toposort(result.outputs)}
    feeds = {"d": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)}
    np.testing.assert_allclose(ng.execute(result.outputs, feeds)[0], ng.execute([g], feeds)[0],
                               rtol=1e-5)


def test_explain_saturate_names_the_chain_of_rules_and_writes_no_graph(files):
    before = sorted(p.name for p in files.iterdir())
    r = run("explain", "--saturate", files / "g.json", "--rules", RULES, "--passes", "algebra",
            "--unverified", "--egraph", files / "eg.dot")
    assert r.returncode == 0, r.stderr
    assert re.search(r"changed: Multiply .*\n +rules: distribute \(.*\) -> cancel", r.stdout)
    assert "stopped: saturated" in r.stdout and "e-graph picture: " in r.stdout
    assert (files / "eg.dot").read_text().startswith('digraph "eg"')
    assert sorted(p.name for p in files.iterdir()) == sorted([*before, "eg.dot", "eg.svg"]) \
        or sorted(p.name for p in files.iterdir()) == sorted([*before, "eg.dot"])


def test_explain_needs_a_rule_or_saturate_and_not_both(files):
    r = run("explain", files / "g.json", "--rules", RULES)
    assert r.returncode == 2 and "explain needs a RULE" in r.stderr
    r = run("explain", "cancel", files / "g.json", "--rules", RULES, "--saturate")
    assert r.returncode == 2 and "GRAPH only" in r.stderr
    r = run("explain", "cancel", files / "g.json", "--rules", RULES, "--unverified")
    assert r.returncode == 2 and "only meaningful with --saturate" in r.stderr
