"""The `ngrules` command, run as a subprocess against temporary files."""

import json
import shutil
import subprocess

import numpy as np
import pytest

import ngrules as ng

RULES = """
pass simplify
rule mul_one: x * 1 => x      # x * 1 = x
rule add_zero: x + 0 => x     # x + 0 = x
"""


def run(*args, cwd):
    exe = shutil.which("ngrules")
    assert exe, "the ngrules console script is installed with the package"
    return subprocess.run(
        [exe, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def files(tmp_path):
    a = ng.make_axis(3, "A")
    x = ng.placeholder([a], name="x")
    ng.save_graph(tmp_path / "g.json", [ng.tanh(x * 1.0 + 0.0)])
    (tmp_path / "s.rules").write_text(RULES)
    return tmp_path


def assert_bad_input(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_help_on_every_command_has_an_example(tmp_path):
    for cmd in ("check", "verify", "apply", "explain", "fmt", "demo"):
        proc = run(cmd, "--help", cwd=tmp_path)
        assert proc.returncode == 0 and "example: ngrules" in proc.stdout


def test_check_reports_ok_and_located_errors(files):
    ok = run("check", "s.rules", cwd=files)
    assert ok.returncode == 0 and "2 rules in 1 pass, 0 pipelines\n" in ok.stdout
    (files / "bad.rules").write_text("rule r: Mul(x, 1) => x\n")
    bad = run("check", "bad.rules", cwd=files)
    assert bad.returncode == 1
    assert "bad.rules:1:9: error: unknown op 'Mul'" in bad.stderr and "^" in bad.stderr


def test_apply_rewrites_and_prints_what_fired(files):
    proc = run(
        "apply", "g.json", "-o", "out.json", "--rules", "s.rules", "--trace", "--stats", cwd=files
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "mul_one" in proc.stdout
        and "s.rules:3" in proc.stdout
        and "stopped: fixpoint" in proc.stdout
    )
    (out,) = ng.load_graph(files / "out.json")
    assert [n.op for n in ng.toposort([out])] == ["Placeholder", "Tanh"]


def test_explain_quotes_the_rule_text(files):
    proc = run("explain", "mul_one", "g.json", "--rules", "s.rules", cwd=files)
    assert proc.returncode == 0 and "matches at 1 node(s)" in proc.stdout


def test_fmt_check_then_rewrite(files):
    (files / "u.rules").write_text("rule   a :  x*1=>x\n")
    assert run("fmt", "u.rules", "--check", cwd=files).returncode == 1
    assert run("fmt", "u.rules", cwd=files).returncode == 0
    assert run("fmt", "u.rules", "--check", cwd=files).returncode == 0
    assert ng.parse_rules((files / "u.rules").read_text()).rules[0].name == "a"


@pytest.mark.parametrize(
    "setup, args, fragments",
    [
        pytest.param(
            lambda d: (d / "g.json").write_text('{"format": '),
            ("apply", "g.json"),
            ["g.json:1:"],
            id="truncated-json",
        ),
        pytest.param(
            lambda d: (d / "g.json").write_text("not json at all"),
            ("apply", "g.json"),
            ["g.json:1:1"],
            id="malformed-json",
        ),
        pytest.param(
            lambda d: _rename_op(d / "g.json", "Tanh", "Tahn"),
            ("apply", "g.json"),
            ["unknown op 'Tahn'"],
            id="unknown-op",
        ),
        pytest.param(
            lambda d: None, ("apply", "missing.json"), ["missing.json"], id="missing-file"
        ),
    ],
)
def test_bad_input_exits_2_with_one_located_line_and_no_output(files, setup, args, fragments):
    # errors in the rules exit 1 with every one of them, as `check`: tests/test_cli_ux.py
    setup(files)
    proc = run(*args, "-o", "out.json", "--rules", "s.rules", cwd=files)
    assert_bad_input(proc, *fragments)
    assert not (files / "out.json").exists()


def test_usage_errors_exit_2(tmp_path):
    assert_bad_input(run("apply", cwd=tmp_path), "error")
    assert_bad_input(run("frobnicate", cwd=tmp_path), "invalid choice")


def _rename_op(path, old, new):
    data = json.loads(path.read_text())
    for node in data["nodes"]:
        if node["op"] == old:
            node["op"] = new
    path.write_text(json.dumps(data))


def test_saved_graph_round_trips_through_the_command(files):
    proc = run("apply", "g.json", "-o", "same.json", "--rules", "s.rules", cwd=files)
    assert proc.returncode == 0
    (before,), (after,) = ng.load_graph(files / "g.json"), ng.load_graph(files / "same.json")
    value = {"x": np.arange(3, dtype=np.float32)}
    np.testing.assert_allclose(ng.execute([before], value)[0], ng.execute([after], value)[0])


def test_verify_passes_sound_rules_and_fails_a_wrong_one(files):
    good = run("verify", "s.rules", "--examples", "5", cwd=files)
    assert good.returncode == 0 and "2 verified" in good.stdout
    assert "[" not in good.stderr  # no terminal, no progress bar
    (files / "w.rules").write_text("rule wrong: x * 1 => x + 1  # off by one\n" + RULES)
    bad = run("verify", "w.rules", "--examples", "5", "--jobs", "2", cwd=files)  # 2 workers
    assert bad.returncode == 1 and "counterexample" in bad.stdout and "w.rules:1" in bad.stdout
    assert "1 wrong, 2 verified of 3 rules" in bad.stdout
    assert bad.stdout.index("wrong") < bad.stdout.index("mul_one") < bad.stdout.index("add_zero")


def test_apply_draws_the_result_with_rewritten_nodes_marked(files):
    rule = "rule tanh_exp: Tanh(x) => 2 * Reciprocal(1 + Exp(-2 * x)) - 1  # tanh via exp\n"
    (files / "s.rules").write_text("pass p\n" + rule)
    proc = run("apply", "g.json", "-o", "out.json", "--rules", "s.rules", "--picture", "o.dot",
               cwd=files)
    assert proc.returncode == 0 and "picture:" in proc.stdout
    dot = (files / "o.dot").read_text()
    assert dot.startswith("digraph") and "tanh_exp" in dot
