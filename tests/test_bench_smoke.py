"""The benchmarks run at tiny sizes, and each compares two computations that agree."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def executor_bench():
    return _load("executor")


@pytest.mark.parametrize(
    "fn, kwargs, tol",
    [
        ("bench_mlp", {"c": 5, "n": 4, "d": 3, "repeat": 1}, 1e-5),
        ("bench_chain", {"length": 30, "side": 2, "repeat": 1}, 1e-12),
    ],
    ids=["mlp", "chain"],
)
def test_executor_bench_agrees_with_numpy(executor_bench, fn, kwargs, tol):
    row = getattr(executor_bench, fn)(**kwargs)
    assert row["error"] < tol
    assert row["executor"] > 0 and row["numpy"] > 0 and row["nodes"] > 0


def test_executor_bench_main_prints_a_table(executor_bench, capsys):
    rows = executor_bench.main(
        ["--c", "3", "--n", "4", "--d", "2", "--chain", "9", "--side", "2", "--repeat", "1"]
    )
    out = capsys.readouterr().out
    assert len(rows) == 2 and "ratio" in out and "elementwise chain 9 nodes" in out


def test_graphfile_bench_loads_both_sizes(capsys):
    row = _load("graphfile").main(["20"])
    assert row["small"] > 0 and row["large"] > 0
    assert "ratio" in capsys.readouterr().out


def test_parser_setup_bench_measures_both_ways():
    row = _load("parser_setup").main(runs=1)
    assert row["built"] > 0 and row["cached"] > 0


def test_output_quality_and_zoo_status_benches_run_on_one_zoo_model():
    pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    import sys

    sys.path.insert(0, str(BENCH))  # both import bench/zoo_stages.py
    quality, status = _load("output_quality"), _load("zoo_status")
    path = BENCH.parent / "tests" / "zoo" / "mlp_dynamic_legacy_op17.onnx"
    peers_left_out = set(quality.PEERS) - {"onnxruntime ALL (offline)"}
    rows = quality.measure(path, ["cpu"], ng_library(), rounds=1, runs=1, missing=peers_left_out)
    by_name = {row[0]: row for row in rows}
    assert by_name["input"][1] == len(onnx.load(str(path)).graph.node)
    assert by_name["ngrules cpu"][4] == "" and float(by_name["ngrules cpu"][3]) > 0
    for_ort = by_name["ngrules cpu --target onnxruntime"]  # FusedGemm, Gemm, Gelu, Gemm
    assert for_ort[4] == "" and for_ort[1] <= by_name["onnxruntime ALL (offline)"][1] < 9
    assert int(by_name["onnxruntime ALL (offline)"][1]) > 0 and "onnxsim" not in by_name
    row = status.status_row(path, ["cpu"], ng_library())
    assert row == {"model": path.stem, "import": "ok", "no rules": "ok", "cpu": "ok"}


def ng_library():
    from ngrules.lang.library import load_library

    return load_library()



def test_prove_library_bench_tables_each_rules_verdict_and_counts_them():
    import ngrules as ng
    from ngrules.verification.verdicts import Verdict

    bench = _load("prove_library")
    rules = ng.parse_rules("rule a: -(-x) => x\nrule b: Log(Exp(x)) => x\nrule c: x * 1 => x\n")
    report = [Verdict(rules.rule("a"), "proved", seconds=0.5),
              Verdict(rules.rule("b"), "proved-reals", seconds=1.25),
              Verdict(rules.rule("c"), "verified")]
    assert bench.table(report)[2:] == ["| a | proved | 0.5 |", "| b | proved-reals | 1.2 |",
                                       "| c | verified | 0.0 |"]
    assert bench.totals(report) == ("2 of 3 rules proved (1 in IEEE floats, 1 over the reals); "
                                    "1 verified; slowest 1.2 s")


def test_saturate_bench_at_tiny_sizes():
    bench = _load("saturate")
    for row in bench.bench_stuck():
        assert row["saturated"] < row["input"] and row["greedy+distribute"] == "cycle"
        assert row["diff"] < 1e-12
    (row,) = bench.bench_engines([3])
    assert row["ngrules Add e-nodes"] == row["exact"] == 3**3 - 2**4 + 1


def test_tool_stages_bench_wraps_functions_that_exist():
    """A renamed stage function fails here, not in a measurement (running the command is a
    fresh interpreter importing onnx: left to the bench itself)."""
    import importlib

    pytest.importorskip("onnx")
    bench = _load("tool_stages")
    for module, name, _ in bench.WRAPPED:
        assert callable(getattr(importlib.import_module(module), name)), (module, name)
