"""The CLI fuzzer's fixed-seed share (issues 20 and 25): a few models and mutants of them
through every command that reads a model (import, show, apply, export, run, coverage, explain;
verify and check refuse one); each ends with a result or an error line, never a traceback.
`tests/onnx_cli_fuzz.py` runs a campaign and prints its figures."""

import pytest

pytest.importorskip("onnx")

import onnx_cli_fuzz  # noqa: E402
import onnx_fuzz  # noqa: E402

SMALL = ("mlp", "test_Conv2d", "zoo_lstm_legacy_op17")


def test_models_and_mutants_through_every_command_end_in_a_result_or_one_error_line():
    models = {name: data for name, data in onnx_fuzz.seeds().items() if name in SMALL}
    result = onnx_cli_fuzz.campaign(6, seed=20251203, models=models, originals=True)
    commands = len(onnx_cli_fuzz.commands("m", "o", [], []))
    assert result.runs == (6 + len(SMALL)) * commands
    assert not result.crashes, "\n".join(result.crashes[:3])
    for command in ("import", "show", "apply", "export", "run", "coverage", "explain"):
        assert result.outcomes[command].get("ok", 0) >= len(SMALL), (command, result.outcomes)
    assert result.outcomes["verify"] == {"refused": 6 + len(SMALL)}
