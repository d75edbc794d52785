"""The commands for seeing what happened: show, run, ops, rules, --disable, traces with
bindings, explain with guard values, fmt --check diffs, the demo's output and locations."""

import argparse
import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import ngrules as ng
from ngrules.cli.main import COMMANDS, build_parser, main
from ngrules.ir.ops import OPS
from ngrules.lang.library import load_library

ROOT = Path(__file__).resolve().parent.parent

RULES = """\
pass simplify
rule mul_one: x * 1 => x
rule add_zero: x + 0 => x
rule two_axes: s @ Sum(y) if y.rank == 2 and len(s.reduction_axes) == 2 => s
"""


def run(*args, cwd):
    """`ngrules args...` in cwd, in this process (the console script is tested in test_cli)."""
    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as e:  # --help, usage errors
                code = e.code
    finally:
        os.chdir(here)
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.fixture
def files(tmp_path):
    a, b = ng.make_axis(3, "A"), ng.make_axis(2, "B")
    x = ng.placeholder([a, b], name="x")
    ng.save_graph(tmp_path / "g.json", [ng.tanh(x * 1.0 + 0.0), ng.sum(x * 2.0,
                                                                      reduction_axes=[b])])
    (tmp_path / "s.rules").write_text(RULES)
    np.save(tmp_path / "x.npy", np.arange(6, dtype=np.float32).reshape(3, 2))
    return tmp_path


def test_every_command_has_help_with_an_example(tmp_path):
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    names = list(sub.choices)
    assert len(names) == len(COMMANDS)
    assert {"show", "run", "ops", "rules", "lsp", "import", "export", "coverage"} <= set(names)
    for name in names:
        proc = run(name, "--help", cwd=tmp_path)
        assert proc.returncode == 0 and "example: ngrules" in proc.stdout, name


def test_show_prints_one_node_a_line_and_can_draw(files):
    proc = run("show", "g.json", "--picture", "g.dot", cwd=files)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].strip() == "%0 = Placeholder x  [A:3, B:2] float32"
    assert any(re.fullmatch(r"\s*%\d+ = Sum\(%\d+\)  \[A:3\] float32  reduction_axes=\[B:2\]", line)
               for line in lines)
    assert lines[-2] == "outputs: #0 %7, #1 %11" or lines[-1].startswith("outputs: #0 %7")
    assert (files / "g.dot").read_text().startswith("digraph ngrules {")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("show", "g.json", "--picture", "g.json"), "would overwrite the input g.json"),
        (("show", "g.json", "--picture", "g.npz"), "would overwrite the input g.npz"),
        (("show", "g.json", "--picture", "s.svg"), "s.svg is given for two outputs"),
        (("export", "g.json", "-o", "g.npz"), "would overwrite the input g.npz"),
    ],
)
def test_an_output_onto_an_input_is_refused_before_anything_is_written(files, args, fragment):
    before = {p.name: p.read_bytes() for p in files.iterdir()}
    proc = run(*args, cwd=files)
    assert proc.returncode == 2 and fragment in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""
    assert {p.name: p.read_bytes() for p in files.iterdir()} == before


@pytest.mark.parametrize("command", [("show", "g.json"),
                                     ("apply", "g.json", "-o", "o.json", "--rules", "s.rules")])
@pytest.mark.parametrize("picture, fragment", [("", "an output path is empty"),
                                               ("/", "/: is a folder, not a file")])
def test_a_picture_path_with_no_file_name_is_bad_input(files, command, picture, fragment):
    """Not a traceback from naming the SVG beside it (`Path("/").with_suffix` raises)."""
    before = {p.name: p.read_bytes() for p in files.iterdir()}
    proc = run(*command, "--picture", picture, cwd=files)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"ngrules: error: {fragment}"]
    assert {p.name: p.read_bytes() for p in files.iterdir()} == before


def test_run_to_an_empty_output_path_is_bad_input_not_a_print(files):
    before = {p.name: p.read_bytes() for p in files.iterdir()}
    proc = run("run", "g.json", "--feed", "x=x.npy", "-o", "", cwd=files)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stdout
    assert proc.stderr.strip().splitlines() == ["ngrules: error: an output path is empty"]
    assert {p.name: p.read_bytes() for p in files.iterdir()} == before


def test_run_prints_or_saves_the_outputs(files):
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    proc = run("run", "g.json", "--feed", "x=x.npy", cwd=files)
    assert proc.returncode == 0, proc.stderr
    assert "output 0: Tanh [A:3, B:2] float32" in proc.stdout
    assert "output 1: Sum [A:3] float32\n[ 2. 10. 18.]" in proc.stdout
    proc = run("run", "g.json", "--feed", "x=x.npy", "-o", "out.npz", cwd=files)
    assert proc.returncode == 0 and "output0, output1" in proc.stdout
    clash = run("run", "g.json", "--feed", "x=x.npy", "-o", "x.npy", cwd=files)
    assert clash.returncode == 2 and np.load(files / "x.npy").shape == (3, 2)
    with np.load(files / "out.npz") as saved:
        np.testing.assert_allclose(saved["output0"], np.tanh(x), rtol=1e-6)
        np.testing.assert_allclose(saved["output1"], (2 * x).sum(axis=1), rtol=1e-6)


def test_run_without_a_feed_is_one_located_line(files):
    proc = run("run", "g.json", cwd=files)
    assert proc.returncode == 2 and "missing feed for placeholder 'x'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = run("run", "g.json", "--feed", "x", cwd=files)
    assert proc.returncode == 2 and "write NAME=FILE.npy" in proc.stderr


def test_ops_lists_the_op_table_with_signatures(tmp_path):
    proc = run("ops", cwd=tmp_path)
    assert proc.returncode == 0
    heads = [line for line in proc.stdout.splitlines() if not line.startswith(" ")]
    assert len(heads) == len(OPS)
    assert "Sum(x, reduction_axes: axes)" in heads and "Dot(x, y)" in heads
    assert "BatchnormBprop(x0, x1, x2, x3, x4, eps: float = 0.001) -> 3 outputs" in heads
    proc = run("ops", "Sum", cwd=tmp_path)
    assert "the operand's axes less `reduction_axes`" in proc.stdout
    assert run("ops", "Summ", cwd=tmp_path).returncode == 2


def test_rules_lists_passes_rules_pipelines_and_locations(files):
    proc = run("rules", "s.rules", cwd=files)
    assert proc.stdout.splitlines()[:2] == ["pass simplify (3 rules)",
                                            "  mul_one                      s.rules:2"]
    shipped = run("rules", cwd=files).stdout
    assert re.search(r"  dot_reorder +ngrules:rules/dot\.rules:\d+\n", shipped)
    assert "pipeline cpu: " in shipped


def test_every_command_that_loads_rules_files_takes_import_path(files):
    """A file importing from outside its folder loads in each command given --import-path."""
    (files / "shared").mkdir()
    (files / "shared" / "lib.rules").write_text("pass shared\nrule mul_one: x * 1 => x\n")
    (files / "proj").mkdir()
    (files / "proj" / "m.rules").write_text('import "../shared/lib.rules"\n')
    for args in (("check", "proj"), ("verify", "proj", "--examples", "2"), ("rules", "proj"),
                 ("apply", "g.json", "-o", "o.json", "--rules", "proj"),
                 ("explain", "mul_one", "g.json", "--rules", "proj"),
                 ("coverage", "proj", "g.json")):
        assert run(*args, cwd=files).returncode != 0, args
        proc = run(*args, "--import-path", "shared", cwd=files)
        assert proc.returncode == 0, (args, proc.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ("explain", "mul_one", "g.json", "--rules", "s.rules", "--limit", "-1"),
        ("coverage", "s.rules", "g.json", "--misses", "-1"),
        ("run", "g.json", "--feed", "x=x.npy", "--max-items", "-1"),
    ],
)
def test_a_negative_count_is_a_usage_error(files, args):
    """Not a slice from the end: `--limit -1` showed every miss but the last."""
    proc = run(*args, cwd=files)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"ngrules: error: argument {args[-2]}: must be at least 0, not -1 (see --help)"]


def test_disable_leaves_a_rule_out_of_apply(files):
    proc = run("apply", "g.json", "-o", "o.json", "--rules", "s.rules", "--disable", "mul_one",
               cwd=files)
    assert proc.returncode == 0, proc.stderr
    assert "add_zero" in proc.stdout and "mul_one" not in proc.stdout
    assert "Multiply" in run("show", "o.json", cwd=files).stdout
    typo = run("apply", "g.json", "-o", "o.json", "--rules", "s.rules", "--disable", "mul_on",
               cwd=files)
    assert typo.returncode == 2 and "no rule named 'mul_on' (did you mean 'mul_one'?)" in \
        typo.stderr


def test_trace_shows_what_each_variable_matched(files):
    proc = run("apply", "g.json", "-o", "o.json", "--rules", "s.rules", "--trace", cwd=files)
    lines = proc.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if "mul_one" in line)
    assert lines[first + 1].strip() == "x = Placeholder(x)"


def test_explain_shows_bindings_and_the_values_of_a_false_guard(files):
    proc = run("explain", "two_axes", "g.json", "--rules", "s.rules", cwd=files)
    assert proc.returncode == 0, proc.stderr
    assert ("the guard is false: `len(s.reduction_axes) == 2` is false, with "
            "len(s.reduction_axes) = 1") in proc.stdout
    assert "bindings so far: y = Multiply(Placeholder(x), Broadcast(...)), s = Sum(" in \
        proc.stdout
    proc = run("explain", "mul_one", "g.json", "--rules", "s.rules", cwd=files)
    assert "    bindings: x = Placeholder(x)" in proc.stdout


def test_fmt_check_prints_a_unified_diff(files):
    (files / "m.rules").write_text("pass   simplify\nrule r:x*1=>x\n")
    proc = run("fmt", "m.rules", "--check", cwd=files)
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[:7] == [
        "--- m.rules", "+++ m.rules (formatted)", "@@ -1,2 +1,2 @@",
        "-pass   simplify", "-rule r:x*1=>x", "+pass simplify", "+rule r: x * 1 => x",
    ]
    assert (files / "m.rules").read_text() == "pass   simplify\nrule r:x*1=>x\n"


def test_fmt_check_diffs_the_bytes_it_compared(files):
    """A file that differs only in its line ends gets a diff, not an empty one."""
    (files / "m.rules").write_bytes(b"pass simplify\r\nrule r: x * 1 => x\r\n")
    proc = run("fmt", "m.rules", "--check", cwd=files)
    assert proc.returncode == 1
    assert "\n-pass simplify\r\n" in proc.stdout and "\n+pass simplify\n" in proc.stdout


def test_shipped_rules_print_as_ngrules_rules_everywhere(files):
    rule = load_library().rule("mul_one")
    assert re.fullmatch(r"ngrules:rules/simplify\.rules:\d+", rule.location)
    proc = run("apply", "g.json", "-o", "o.json", "--trace", cwd=files)
    located = [line for line in proc.stdout.splitlines() if "mul_one" in line]
    assert located and all("ngrules:rules/simplify.rules:" in line for line in located)
    assert str(ROOT) not in proc.stdout and "site-packages" not in proc.stdout
    explained = run("explain", "mul_one", "g.json", cwd=files).stdout
    assert explained.startswith("rule mul_one (ngrules:rules/simplify.rules:")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    where = tmp_path_factory.mktemp("demo")
    proc = run("demo", cwd=where)
    assert proc.returncode == 0, proc.stderr
    return where, proc.stdout


def test_the_demo_says_how_the_speed_up_is_measured(demo):
    _, out = demo
    assert re.search(r"speed-up from rewriting: [0-9.]+x \(numpy executor, best of \d+ runs of "
                     r"each graph on the same inputs, before / after\)", out)


def test_the_demo_writes_to_a_named_folder_the_repo_ignores(demo):
    where, out = demo
    from ngrules.cli.demo import OUT

    assert (where / OUT / "after.dot").is_file()
    assert f"(pictures are written to {OUT}/; --out FOLDER to change)" in out
    assert f"{OUT}/" in (ROOT / ".gitignore").read_text().split()
    assert f"`{OUT}/`" in (ROOT / "README.md").read_text()
    assert "ngrules:rules/dot.rules:" in out


def test_the_demo_pictures_explain_output_nodes_and_flattened_axes(demo):
    where, _ = demo
    from ngrules.cli.demo import OUT

    after = (where / OUT / "after.dot").read_text()
    assert "legend_outputs" in after and "reads output i of a multi-output node" in after
    assert "legend_flattened" in after and "flattened into one axis" in after
    before = (where / OUT / "before.dot").read_text()
    assert "legend_outputs" not in before and "legend_flattened" not in before


def test_lsp_without_pygls_says_how_to_install_it(tmp_path):
    code = (
        "import sys; sys.modules['pygls'] = None; sys.modules['pygls.lsp.server'] = None\n"
        "from ngrules.cli.main import main\nsys.exit(main(['lsp']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    assert "pip install 'ngrules[lsp]'" in proc.stderr and "Traceback" not in proc.stderr


def test_the_command_line_imports_no_optional_backend_before_a_command_needs_it(tmp_path):
    """Every command pays for what the parser imports: onnx (with ml_dtypes, half a second),
    onnxruntime, z3, hypothesis and the language server load only in the commands that use
    them (issue 34, item 6)."""
    heavy = ["onnx", "onnxruntime", "z3", "hypothesis", "pygls", "lsprotocol", "ngrules.lsp",
             "ngrules.interop.onnx", "ngrules.saturation.run", "ngrules.verification.verify"]
    code = (
        "import sys\nfrom ngrules.cli.main import build_parser\n"
        "build_parser().parse_args(['apply', 'model.onnx', '-o', 'out.onnx'])\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
