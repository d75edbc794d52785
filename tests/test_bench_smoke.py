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
