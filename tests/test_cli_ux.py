"""What a new user meets first on the command line (issue 38): every rules error at once with
`check`'s exit code, the pipeline a file means, the passes that ran, suggestions for typos.

Run in process (`cli.main.main`), so each test costs milliseconds, not a subprocess."""

import pytest
from test_cli import files  # noqa: F401 - the fixture `ux` builds on

from ngrules.cli.main import main

BAD = """pass p
rule a: Foo(x) => x
rule b: Bar(x, y) => z
"""

ONE_PIPELINE = """pass good
rule mul_one: x * 1 => x
pass broken
rule add_zero: x + 0 => x
pipeline main: good
"""


@pytest.fixture
def ux(request):
    """test_cli's folder (g.json, s.rules) with a file of errors and one with one pipeline."""
    folder = request.getfixturevalue("files")
    (folder / "bad.rules").write_text(BAD)
    (folder / "one.rules").write_text(ONE_PIPELINE)
    return folder


def _errors(capsys, argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("command", ["verify", "apply", "explain", "coverage", "show", "fmt"])
def test_every_command_that_loads_rules_reports_every_error_with_checks_exit_code(
    ux, capsys, command
):
    bad, g, out = ux / "bad.rules", ux / "g.json", ux / "out.json"
    argv = {
        "verify": ["verify", bad],
        "apply": ["apply", g, "-o", out, "--rules", bad],
        "explain": ["explain", "a", g, "--rules", bad],
        "coverage": ["coverage", bad, g],
        "show": ["show", g, "--ops", bad],
        "fmt": ["fmt", bad],
    }[command]
    check_code, check_err = _errors(capsys, ["check", bad])
    code, err = _errors(capsys, argv)
    if command == "fmt":  # fmt only parses: its errors are syntax errors, of every file
        (ux / "syn.rules").write_text("rule r: x * => x\n")
        (ux / "syn2.rules").write_text("rule s: => x\n")
        code, err = _errors(capsys, ["fmt", ux / "syn.rules", ux / "syn2.rules"])
        assert "syn.rules:1:13" in err and "syn2.rules:1:9" in err and "2 error(s)" in err
    else:
        assert err == check_err  # the same three located errors, with their carets
        assert "unknown op 'Bar'" in err and "'z' is never bound" in err
    assert code == check_code == 1
    assert not out.exists()


def test_a_file_with_one_pipeline_runs_it_and_apply_says_so(ux, capsys):
    out = ux / "out.json"
    assert main(["apply", str(ux / "g.json"), "-o", str(out), "--rules",
                 str(ux / "one.rules")]) == 0
    captured = capsys.readouterr()
    assert "pipeline main (default): passes good\n" in captured.err
    assert "mul_one" in captured.out and "add_zero" not in captured.out  # `broken` did not run
    assert main(["apply", str(ux / "g.json"), "-o", str(out), "--rules",
                 str(ux / "one.rules"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_apply_names_the_passes_when_no_pipeline_is_chosen(ux, capsys):
    (ux / "two.rules").write_text(ONE_PIPELINE + "pipeline other: broken\n")
    out = ux / "out.json"
    assert main(["apply", str(ux / "g.json"), "-o", str(out), "--rules",
                 str(ux / "two.rules")]) == 0
    captured = capsys.readouterr()
    assert "passes: good, broken (no pipeline)\n" in captured.err
    assert "mul_one" in captured.out and "add_zero" in captured.out
    from ngrules.lang.library import load_library

    main(["apply", str(ux / "g.json"), "-o", str(out)])  # the library: cpu among several
    cpu = list(load_library().pipelines["cpu"])  # from onnx-comp: decompose_* passes first
    assert cpu[0].startswith("decompose") and "fold_batchnorm" in cpu
    assert f"pipeline cpu (default): passes {', '.join(cpu)}\n" in capsys.readouterr().err


@pytest.mark.parametrize("argv, suggestion", [
    (["apply", "{g}", "-o", "{out}", "--pipeline", "cpuu"], "no pipeline named 'cpuu' (did you "
     "mean 'cpu'?)"),
    (["apply", "{g}", "-o", "{out}", "--passes", "simplfy"], "(did you mean 'simplify'?)"),
    (["explain", "mul_onee", "{g}"], "no rule named 'mul_onee' (did you mean 'mul_one' or"),
    (["coverage", "{one}", "{g}", "--pipeline", "mian"], "(did you mean 'main'?)"),
])
def test_typos_in_pipeline_pass_and_rule_names_get_a_suggestion(ux, capsys, argv, suggestion):
    paths = {"g": ux / "g.json", "out": ux / "out.json", "one": ux / "one.rules"}
    code, err = _errors(capsys, [a.format(**paths) for a in argv])
    assert code == 2 and suggestion in err and len(err.splitlines()) == 1


def test_coverage_reads_a_model_apply_reads_and_prints_shipped_rules_by_library_path(
    tmp_path, capsys
):
    onnx = pytest.importorskip("onnx")
    import json

    from ngrules.interop.onnx.examples import mlp
    from ngrules.lang.library import library_path

    onnx.save(mlp(), tmp_path / "mlp.onnx")  # its batch N is symbolic: no --length given
    (tmp_path / "whole.rules").write_text('import "ngrules:dot.rules"\n')
    assert main(["coverage", str(tmp_path / "whole.rules"), str(tmp_path / "mlp.onnx"),
                 "--json"]) == 0  # every pass: as apply, ONNX's Gemm read as the Dot they name
    rows = {r["rule"]: r for r in json.loads(capsys.readouterr().out)["rules"]}
    assert rows["dot_matrix_matrix"]["fired"] == {str(tmp_path / "mlp.onnx"): 3}
    wheres = [m["where"] for r in rows.values() for ms in r["near_misses"].values() for m in ms]
    assert wheres and all(w.startswith("ngrules:rules/dot.rules:") for w in wheres)
    (tmp_path / "mine.rules").write_text('import "ngrules:dot.rules"\n'
                                         "pipeline mine: decompose, dot_lowering\n")
    assert main(["coverage", str(tmp_path / "mine.rules"), str(tmp_path / "mlp.onnx"),
                 "--json"]) == 0
    out = capsys.readouterr().out
    rows = {r["rule"]: r for r in json.loads(out)["rules"]}
    assert rows["dot_matrix_matrix"]["fired"] == {str(tmp_path / "mlp.onnx"): 3}
    wheres = [m["where"] for r in rows.values() for ms in r["near_misses"].values() for m in ms]
    assert wheres and all(w.startswith("ngrules:rules/dot.rules:") for w in wheres)
    assert str(library_path()) not in out


def test_verify_opset_runs_a_newer_onnx_op_at_its_opset(tmp_path, capsys, scratch_ops):
    pytest.importorskip("onnxruntime")
    (tmp_path / "mish.rules").write_text("op UxCliMish(x) = x * Tanh(Log(Exp(x) + 1)) onnx Mish\n")
    assert main(["verify", str(tmp_path / "mish.rules"), "--opset", "18"]) == 0
    assert "verified      onnx UxCliMish: agrees with its body" in capsys.readouterr().out
