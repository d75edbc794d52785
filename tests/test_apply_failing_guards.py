"""`ngrules apply` on a graph where an expression of a rule fails at one node (issue 11,
item 8): the shipped `prod_const` once aborted the whole rewrite with an OverflowError."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np

import ngrules as ng


def ngrules(*args, cwd):
    exe = shutil.which("ngrules")
    assert exe
    return subprocess.run(
        [exe, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def _graph(tmp_path):
    n = ng.make_axis(2000, "N")
    prod = ng.prod(ng.constant(2.0, [n]), out_axes=())
    ng.save_graph(tmp_path / "g.json", [-(-prod)])
    return prod


def test_apply_folds_a_product_that_overflows_to_inf(tmp_path):
    _graph(tmp_path)
    proc = ngrules("apply", "g.json", "-o", "out.json", "--quiet", cwd=tmp_path)  # no passes line
    assert proc.returncode == 0, proc.stderr
    assert "prod_const" in proc.stdout and not proc.stderr
    (value,) = ng.execute(ng.load_graph(tmp_path / "out.json"), {})
    assert value.dtype == np.float32 and value == np.inf


def test_a_let_that_fails_at_a_node_is_a_warning_and_the_rewrite_goes_on(tmp_path):
    _graph(tmp_path)
    (tmp_path / "r.rules").write_text(
        "pass p\n"
        "rule too_big: p @ Prod(x) let v = pow(10, 100000000) => p\n"
        "rule neg_neg: -(-x) => x\n"
    )
    proc = ngrules("apply", "g.json", "-o", "out.json", "--rules", "r.rules", "--quiet",
                   cwd=tmp_path)  # warnings still shown; the passes line is not
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("r.rules:2:35: warning: rule too_big (r.rules:2): pow(10, 100000000)")
    assert "match rejected" in line and "fired" in proc.stdout and "neg_neg" in proc.stdout
    assert ng.load_graph(tmp_path / "out.json")[0].op == "Prod"
