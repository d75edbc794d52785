"""The ONNX fuzzer's fixed-seed share (issue 25): mutants of real models (three built here,
networks exported from PyTorch and shipped with the onnx wheel) import or raise one line of
`NgrulesError`, each within seconds, the process's memory bounded. `tests/onnx_fuzz.py` runs
the full campaign (10,000 mutants) and prints its figures."""

import random

import pytest

pytest.importorskip("onnx")

import onnx_fuzz  # noqa: E402

MUTANTS = 300


def test_mutants_of_real_models_import_or_fail_with_one_line():
    before = onnx_fuzz.peak_rss_mb()
    result = onnx_fuzz.campaign(MUTANTS, seed=20251203)
    assert result.mutants == MUTANTS
    assert not result.crashes, "\n".join(result.crashes[:5])
    assert result.imported > 0 and result.refused > 0  # both sides of the line are exercised
    assert result.slowest < 10, result.slowest_name
    assert onnx_fuzz.peak_rss_mb() - before < 1024


def test_the_seeds_are_real_models_that_import():
    seeds = onnx_fuzz.seeds()
    assert len(seeds) >= 5
    outcomes = {name: onnx_fuzz.run_one_bytes(data)[0] for name, data in seeds.items()}
    assert sum(status == "imported" for status in outcomes.values()) >= 5, outcomes
    assert "crash" not in outcomes.values(), outcomes


def test_mutations_change_the_model_and_are_reproducible():
    data = onnx_fuzz.seeds()["mlp"]
    first = [onnx_fuzz.mutate(random.Random(i), data) for i in range(20)]
    again = [onnx_fuzz.mutate(random.Random(i), data) for i in range(20)]
    assert first == again and sum(m != data for m in first) >= 18
