"""bench/fusion.py at tiny sizes: the fused and lowered graphs agree with their baselines."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "fusion.py"


@pytest.fixture(scope="module")
def fusion_bench():
    spec = importlib.util.spec_from_file_location("bench_fusion", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fused_batchnorm_agrees_with_the_unfused_graph(fusion_bench):
    row = fusion_bench.bench_batchnorm(c=2, hw=2, n=3, repeat=1)
    assert row["error"] < 1e-4 and row["nodes"][1] < row["nodes"][0] / 2
    assert row["baseline"] > 0 and row["ours"] > 0


def test_main_prints_every_case(fusion_bench, capsys):
    rows = fusion_bench.main(
        ["--c", "2", "--hw", "2", "--n", "3", "--scale", "0.05", "--repeat", "1"]
    )
    out = capsys.readouterr().out
    assert len(rows) == 1 + len(fusion_bench.DOTS) and "speedup" in out
    assert all(r["error"] < 1e-5 for r in rows[1:])
