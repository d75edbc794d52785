"""`ngrules import`, `export`, `apply` on .onnx files, `coverage` and `demo --onnx`, run
in-process (importing onnx in each subprocess costs seconds); an unsupported op and a missing
extra are one line and exit 2, checked in subprocesses."""

import json
import subprocess
import sys

import numpy as np
import pytest
from test_cli import assert_bad_input, run

import ngrules as ng

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from ngrules.cli.main import main  # noqa: E402
from ngrules.interop.onnx.examples import mlp  # noqa: E402


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run the command line in this process, in the given folder."""

    def call(*args, cwd):
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return call


@pytest.fixture
def models(tmp_path):
    onnx.save(mlp(), tmp_path / "mlp.onnx")
    x = helper.make_tensor_value_info("x", 1, [2, 3])
    y = helper.make_tensor_value_info("y", 1, [2, 3])
    bad = helper.make_graph([helper.make_node("Unique", ["x"], ["y"], name="head")], "g",
                            [x], [y])
    onnx.save(helper.make_model(bad, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "bad.onnx")
    return tmp_path


def ort_run(path, x):
    return ort.InferenceSession(str(path)).run(None, {"x": x})[0]


def test_import_then_export_gives_the_same_values(cli, models):
    proc = cli("import", "mlp.onnx", "-o", "g.json", "--length", "N=8", cwd=models)
    assert proc.returncode == 0, proc.stderr
    assert "outputs y [N:8" in proc.stdout
    (out,) = ng.load_graph(models / "g.json")
    proc = cli("export", "g.json", "-o", "back.onnx", "--names", "y", cwd=models)
    assert proc.returncode == 0, proc.stderr
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    want = ort_run(models / "mlp.onnx", x)
    np.testing.assert_allclose(ort_run(models / "back.onnx", x), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ng.execute([out], {"x": x})[0], want, rtol=1e-4, atol=1e-5)


def test_apply_reads_and_writes_onnx_by_extension(cli, models):
    proc = cli("apply", "mlp.onnx", "-o", "out.onnx", "--length", "N=8", cwd=models)
    assert proc.returncode == 0, proc.stderr
    assert "dot_matrix_matrix" in proc.stdout
    assert_computes_the_mlp(models / "out.onnx", models, seed=1)


def test_apply_writes_onnxruntime_ops_for_that_target_only_into_onnx(cli, models):
    proc = cli("apply", "mlp.onnx", "-o", "out.onnx", "--length", "N=8", "--pipeline",
               "inference", "--target", "onnxruntime", "--opset", "20", cwd=models)
    assert proc.returncode == 0, proc.stderr
    written = onnx.load(models / "out.onnx")
    ops = [(n.domain, n.op_type) for n in written.graph.node]
    assert ("com.microsoft", "FusedGemm") in ops and ("", "Relu") not in ops, ops
    assert {o.domain: o.version for o in written.opset_import}[""] == 20
    assert_computes_the_mlp(models / "out.onnx", models, seed=3)
    proc = cli("apply", "mlp.onnx", "-o", "g.json", "--length", "N=8", "--target",
               "onnxruntime", cwd=models)
    assert_bad_input(proc, "g.json: --target onnxruntime is for an ONNX output")
    proc = cli("apply", "mlp.onnx", "-o", "g.json", "--length", "N=8", "--opset", "23",
               cwd=models)
    assert_bad_input(proc, "g.json: --opset is for an ONNX output")
    assert not (models / "g.json").exists()


def test_apply_writes_onnx_at_the_models_own_opset(cli, models):
    model = mlp()
    model.opset_import[0].version = 20
    onnx.save(model, models / "mlp20.onnx")
    proc = cli("apply", "mlp20.onnx", "-o", "out.onnx", "--length", "N=8", cwd=models)
    assert proc.returncode == 0, proc.stderr
    written = onnx.load(models / "out.onnx")
    assert {o.domain: o.version for o in written.opset_import}[""] == 20


def assert_computes_the_mlp(path, models, seed: int) -> None:
    """path holds a checked ONNX model with output y that computes what mlp.onnx computes."""
    model = onnx.load(path)  # a JSON file would not parse as a model
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output] == ["y"]
    x = np.random.default_rng(seed).standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(ort_run(path, x), ort_run(models / "mlp.onnx", x),
                               rtol=1e-4, atol=1e-5)


def test_import_never_writes_over_its_model(cli, models):
    model = (models / "mlp.onnx").read_bytes()
    proc = cli("import", "mlp.onnx", "-o", "mlp.onnx", "--length", "N=8", cwd=models)
    assert proc.returncode == 2 and "would overwrite the input mlp.onnx" in proc.stderr
    assert (models / "mlp.onnx").read_bytes() == model
    assert sorted(p.name for p in models.iterdir()) == ["bad.onnx", "mlp.onnx"]


def test_import_to_onnx_writes_a_checked_model_not_json(cli, models):
    proc = cli("import", "mlp.onnx", "-o", "again.onnx", "--length", "N=8", cwd=models)
    assert proc.returncode == 0, proc.stderr
    assert_computes_the_mlp(models / "again.onnx", models, seed=2)


def test_show_run_and_explain_read_an_onnx_model(cli, models):
    proc = cli("show", "mlp.onnx", "--length", "N=8", cwd=models)
    assert proc.returncode == 0, proc.stderr
    assert "Placeholder x" in proc.stdout and "outputs: #0" in proc.stdout
    x = np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)
    np.save(models / "x.npy", x)
    proc = cli("run", "mlp.onnx", "--length", "N=8", "--feed", "x=x.npy", "-o", "y.npz",
               cwd=models)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(models / "y.npz")["y"],
                               ort_run(models / "mlp.onnx", x), rtol=1e-4, atol=1e-5)
    proc = cli("explain", "dot_matrix_matrix", "mlp.onnx", "--length", "N=8", cwd=models)
    assert proc.returncode == 0, proc.stderr
    assert "dot_matrix_matrix" in proc.stdout
    assert_bad_input(cli("show", "mlp.onnx", cwd=models), "--length N=")


def test_unsupported_op_is_one_line_naming_op_and_node(cli, models):
    proc = run("import", "bad.onnx", "-o", "g.json", cwd=models)
    assert_bad_input(proc, "unsupported ONNX op Unique (node 'head')", "supported: Abs")
    assert not (models / "g.json").exists()
    proc = cli("apply", "bad.onnx", "-o", "out.onnx", cwd=models)  # in-process: same line
    assert_bad_input(proc, "Unique")
    assert not (models / "out.onnx").exists()


def test_an_unreadable_model_is_one_line_even_when_the_parser_writes_several(cli, models):
    # protobuf's parser may write several lines; a `.onnx` is read as a binary model
    (models / "g.onnx").write_text('{"format": "ngrules-graph"}')
    proc = cli("import", "g.onnx", "-o", "h.json", cwd=models)
    assert_bad_input(proc, "g.onnx: not a readable ONNX model")
    assert not (models / "h.json").exists()


def test_symbolic_dimension_needs_a_length(cli, models):
    assert_bad_input(cli("import", "mlp.onnx", "-o", "g.json", cwd=models), "--length N=")


def test_coverage_counts_firings_and_near_misses(cli, models):
    ng.save_graph(models / "g.json", [ng.tanh(ng.placeholder([ng.make_axis(3, "A")]) * 1.0)])
    from ngrules.lang.library import library_path

    proc = cli("coverage", library_path(), "mlp.onnx", "g.json", "--length", "N=8", "--json",
               cwd=models)
    assert proc.returncode == 0, proc.stderr
    table = json.loads(proc.stdout)
    rows = {r["rule"]: r for r in table["rules"]}
    assert rows["dot_matrix_matrix"]["fired"] == {"mlp.onnx": 2, "g.json": 0}
    assert rows["mul_one"]["fired"] == {"mlp.onnx": 0, "g.json": 1}
    misses = rows["batchnorm_fprop"]["near_misses"]["mlp.onnx"]
    assert misses and misses[0]["where"].endswith(tuple("0123456789"))
    assert table["models"]["mlp.onnx"]["nodes_before"] == 46
    text = cli("coverage", library_path(), "mlp.onnx", "--length", "N=8", cwd=models)
    assert "closest on mlp.onnx" in text.stdout and "dot_matrix_matrix" in text.stdout


def test_demo_onnx_runs_three_models(cli, tmp_path):
    proc = cli("demo", "--onnx", "--out", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in ("mlp", "cnn", "transformer"):
        assert f"{name}: " in proc.stdout and (tmp_path / "out" / f"{name}.onnx").exists()


def test_without_the_extra_the_command_says_how_to_install_it(tmp_path):
    code = (
        "import sys; sys.modules['onnx'] = None\n"
        "from ngrules.cli.main import main\n"
        "sys.exit(main(['import', 'm.onnx', '-o', 'g.json']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True)
    assert_bad_input(proc, "pip install 'ngrules[onnx]'")


def test_help_of_the_onnx_commands_has_an_example(capsys):
    for cmd in ("import", "export", "coverage"):
        with pytest.raises(SystemExit) as done:
            main([cmd, "--help"])
        assert done.value.code == 0 and "example: ngrules" in capsys.readouterr().out


def test_coverage_goes_on_past_a_model_it_cannot_read(cli, models):
    from ngrules.lang.library import library_path

    proc = cli("coverage", library_path(), "bad.onnx", "mlp.onnx", "--length", "N=8", "--json",
               cwd=models)
    assert proc.returncode == 1, proc.stderr
    table = json.loads(proc.stdout)
    assert "Unique" in table["not_read"]["bad.onnx"]
    rows = {r["rule"]: r for r in table["rules"]}
    assert rows["dot_matrix_matrix"]["fired"] == {"mlp.onnx": 2}
    text = cli("coverage", library_path(), "bad.onnx", "mlp.onnx", "--length", "N=8",
               cwd=models)
    assert text.returncode == 1 and "bad.onnx: not read: unsupported ONNX op Unique" in text.stdout


def test_coverage_says_a_rule_outside_the_pipeline_did_not_run(cli, models):
    (models / "r.rules").write_text(
        "pass used\nrule mul_one: x * 1 => x\n\npass unused\nrule add_zero: x + 0 => x\n\n"
        "pipeline cpu: used\n")
    ng.save_graph(models / "g.json", [ng.placeholder([ng.make_axis(3, "A")]) + 0.0])
    proc = cli("coverage", "r.rules", "g.json", "--json", cwd=models)
    rows = {r["rule"]: r for r in json.loads(proc.stdout)["rules"]}
    assert rows["add_zero"]["in_pipeline"] is False and not rows["add_zero"]["near_misses"]
    assert rows["mul_one"]["in_pipeline"] is True and rows["mul_one"]["near_misses"]
    text = cli("coverage", "r.rules", "g.json", cwd=models).stdout
    assert "add_zero  not in pipeline cpu" in text and "closest on g.json: `x + 0`" not in text


def test_export_and_import_read_any_format_by_suffix(cli, models):
    proc = cli("export", "mlp.onnx", "-o", "again.onnx", "--length", "N=8", cwd=models)
    assert proc.returncode == 0, proc.stderr
    x = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(ort_run(models / "again.onnx", x), ort_run(models / "mlp.onnx", x),
                               rtol=1e-5, atol=1e-6)
    assert cli("import", "mlp.onnx", "-o", "g.json", "--length", "N=8", cwd=models).returncode == 0
    assert cli("import", "g.json", "-o", "copy.json", cwd=models).returncode == 0
    assert len(ng.toposort(ng.load_graph(models / "copy.json"))) == len(
        ng.toposort(ng.load_graph(models / "g.json")))


def test_the_constant_budget_is_an_option_of_every_command_reading_onnx(cli, models):
    shape = onnx.numpy_helper.from_array(np.array([64], np.int64), "s")
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["s"], ["c"], name="fill"),
         helper.make_node("Add", ["x", "c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", 1, [64])],
        [helper.make_tensor_value_info("y", 1, [64])], [shape])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              models / "fill.onnx")
    for command in (["import", "fill.onnx", "-o", "f.json"], ["show", "fill.onnx"]):
        proc = cli(*command, "--max-constant-bytes", "100", cwd=models)
        assert proc.returncode == 2 and "ConstantOfShape node 'fill'" in proc.stderr, proc.stderr
        assert "256 bytes, more than the limit of 100" in proc.stderr
        assert cli(*command, cwd=models).returncode == 0


def _save_gelu_model(path) -> None:
    """A one-node opset-20 model: ONNX's Gelu (before opset 20, a function of ngrules' domain)."""
    x = helper.make_tensor_value_info("x", 1, [2, 3])
    y = helper.make_tensor_value_info("y", 1, [2, 3])
    graph = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), path)


def _written_opset_and_ops(path):
    out = onnx.load(path)
    return [(o.domain, o.version) for o in out.opset_import], [n.op_type for n in out.graph.node]


def test_apply_writes_a_model_back_at_its_own_opset(cli, tmp_path):
    """An opset-20 model's GELU comes back as ONNX's Gelu at opset 20, not as a function."""
    _save_gelu_model(tmp_path / "gelu.onnx")
    proc = cli("apply", "gelu.onnx", "-o", "out.onnx", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _written_opset_and_ops(tmp_path / "out.onnx") == ([("", 20)], ["Gelu"])


def test_import_and_export_write_the_models_own_opset(cli, tmp_path):
    """As `apply` does: `import` to .onnx writes the model's opset, to .json records it, and
    `export` (or `apply`) of that graph file writes it; `--opset` wins; a graph file that
    recorded none is written at the exporter's default, 17."""
    _save_gelu_model(tmp_path / "gelu.onnx")
    own, asked = ([("", 20)], ["Gelu"]), ([("", 17), ("ngrules", 1)], ["Gelu"])
    steps = [(("import", "gelu.onnx", "-o", "direct.onnx"), "direct.onnx", own),
             (("import", "gelu.onnx", "-o", "g.json"), None, None),
             (("export", "g.json", "-o", "back.onnx"), "back.onnx", own),
             (("apply", "g.json", "-o", "applied.onnx"), "applied.onnx", own),
             (("export", "g.json", "-o", "asked.onnx", "--opset", "17"), "asked.onnx", asked)]
    for command, written, expected in steps:
        proc = cli(*command, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        if written:
            assert _written_opset_and_ops(tmp_path / written) == expected, command
    assert json.loads((tmp_path / "g.json").read_text())["onnx_opset"] == 20
    ng.save_graph(tmp_path / "plain.json", ng.load_graph(tmp_path / "g.json"))
    assert cli("export", "plain.json", "-o", "plain.onnx", cwd=tmp_path).returncode == 0
    assert _written_opset_and_ops(tmp_path / "plain.onnx")[0][0] == ("", 17)


def _opset9_with_a_shape_chain(path):
    """Relu, then a Flatten written the legacy way: Shape, Gather, Unsqueeze, Concat, Reshape."""
    x = helper.make_tensor_value_info("x", 1, [2, 3, 4])
    y = helper.make_tensor_value_info("y", 1, [2, 12])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", 7, [], [0])),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n"], ["n1"], axes=[0]),
        helper.make_node("Constant", [], ["rest"], value=helper.make_tensor("m", 7, [1], [-1])),
        helper.make_node("Concat", ["n1", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["r", "target"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)]), path)


def test_apply_no_rules_writes_the_model_back_as_itself(cli, tmp_path):
    """`--no-rules`: no rewrite (the default runs the library's `cpu` pipeline): the same
    nodes at the same opset, the same values; with the pipeline the shape chain is folded."""
    from collections import Counter

    _opset9_with_a_shape_chain(tmp_path / "m.onnx")
    proc = cli("apply", "m.onnx", "--no-rules", "-o", "same.onnx", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no rules" in proc.stdout
    model, written = onnx.load(tmp_path / "m.onnx"), onnx.load(tmp_path / "same.onnx")
    assert Counter(n.op_type for n in written.graph.node) == \
        Counter(n.op_type for n in model.graph.node)
    assert written.opset_import[0].version == 9
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(ort_run(tmp_path / "same.onnx", x),
                                  ort_run(tmp_path / "m.onnx", x))
    proc = cli("apply", "m.onnx", "-o", "cpu.onnx", cwd=tmp_path)
    folded = onnx.load(tmp_path / "cpu.onnx")
    assert proc.returncode == 0 and not [n for n in folded.graph.node if n.op_type == "Shape"]


def test_apply_no_rules_with_a_pipeline_is_refused(cli, tmp_path):
    _opset9_with_a_shape_chain(tmp_path / "m.onnx")
    proc = cli("apply", "m.onnx", "--no-rules", "--pipeline", "cpu", "-o", "o.onnx",
               cwd=tmp_path)
    assert_bad_input(proc, "--no-rules", "--pipeline")
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("option", [["--trace"], ["--stats"], ["--fold-limit", "0"],
                                    ["--rewrite-seconds", "3"], ["--import-path", "."]])
def test_apply_no_rules_with_a_rewrite_option_is_refused(cli, tmp_path, option):
    """An option that steers the rewrite is not silently ignored when there is none."""
    _opset9_with_a_shape_chain(tmp_path / "m.onnx")
    proc = cli("apply", "m.onnx", "--no-rules", *option, "-o", "o.onnx", cwd=tmp_path)
    assert_bad_input(proc, "--no-rules", option[0])
    assert not (tmp_path / "o.onnx").exists()
