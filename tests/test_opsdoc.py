"""docs/ops-reference.md is generated from the op table and must match it."""

import subprocess
import sys
from pathlib import Path

import ngrules as ng
from ngrules.cli.opsdoc import render

REFERENCE = Path(__file__).parents[1] / "docs" / "ops-reference.md"


def test_the_op_reference_matches_the_op_table():
    """Regenerated in a fresh process (only built-in ops); on failure run
    `python -m ngrules.cli.opsdoc > docs/ops-reference.md`."""
    fresh = subprocess.run(
        [sys.executable, "-m", "ngrules.cli.opsdoc"], capture_output=True, text=True, check=True
    ).stdout
    assert fresh == REFERENCE.read_text(encoding="utf-8")


def test_every_built_in_op_has_a_row_with_its_attributes():
    page = render({"Softmax": ng.OPS["Softmax"], "Relu": ng.OPS["Relu"]})
    assert "| `Softmax` | x | `normalization_axes: axes` |" in page
    assert "`slope: float = 0.0` | elementwise, fused |" in page
