"""The rough edges a new user met (issue 23), one test each: the command line in this process."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import ngrules as ng
from ngrules.cli.main import main
from ngrules.ir.graph import make_node

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

Result = namedtuple("Result", "code out err")


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """`ngrules ARGS` in this process, in a temporary folder."""
    monkeypatch.chdir(tmp_path)

    def call(*args):
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return call


def _graph(path="g.json"):
    c, n = ng.make_axis(4, "C"), ng.make_axis(8, "N")
    x = ng.placeholder([c, n], name="x")
    ng.save_graph(path, [ng.sum(-x * 2.0, reduction_axes=[n])])


def _relu_model(path, shape, name="y"):
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], [name])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_explain_names_shipped_rules_by_their_library_location(cli):
    _graph()
    res = cli("explain", "neg_neg", "g.json")
    assert res.code == 0 and "at ngrules:rules/simplify.rules:" in res.out
    assert str(ng.load_library().rule("neg_neg").span.file) not in res.out


def test_check_counts_in_the_right_number(cli, tmp_path):
    (tmp_path / "one.rules").write_text("pass p\nrule a: x * 1 => x\npipeline q: p\n")
    assert cli("check", "one.rules").out == "ok: 1 rule in 1 pass, 1 pipeline\n"
    (tmp_path / "two.rules").write_text(
        "pass p\nrule a: x * 1 => x\npass r\nrule b: x + 0 => x\npipeline q: p\npipeline s: r\n"
    )
    assert cli("check", "two.rules").out == "ok: 2 rules in 2 passes, 2 pipelines\n"


def test_a_length_for_a_dimension_the_model_lacks_is_an_error(cli, tmp_path):
    _relu_model(tmp_path / "m.onnx", ["N", 3])
    res = cli("import", "m.onnx", "-o", "g.json", "--length", "M=2", "--length", "N=2")
    assert res.code == 2 and "no symbolic dimension 'M'" in res.err and "N" in res.err
    assert not (tmp_path / "g.json").exists()
    assert cli("import", "m.onnx", "-o", "g.json", "--length", "N=2").code == 0


def test_a_length_for_a_graph_file_or_for_no_model_is_an_error(cli, tmp_path):
    _graph()
    res = cli("show", "g.json", "--length", "N=2")
    assert res.code == 2 and "is a graph file" in res.err
    _relu_model(tmp_path / "m.onnx", ["N", 3])
    _relu_model(tmp_path / "s.onnx", [2, 3])
    res = cli("coverage", "ngrules:simplify.rules", "m.onnx", "s.onnx", "--length", "B=2")
    assert res.code == 2 and "--length B: no model given" in res.err
    res = cli("coverage", "ngrules:simplify.rules", "m.onnx", "s.onnx", "--length", "N=2")
    assert res.code == 0, res.err


def test_axis_names_are_one_per_axis(cli, tmp_path):
    _relu_model(tmp_path / "m.onnx", [2, 3, 4])
    res = cli("import", "m.onnx", "-o", "g.json", "--axes", "x=B,S")
    assert res.code == 2 and "3 axes, 2 names given" in res.err
    assert cli("import", "m.onnx", "-o", "g.json", "--axes", "x=B,S,").code == 0
    (y,) = ng.load_graph(tmp_path / "g.json")
    assert y.axes.names[:2] == ("B", "S")


def test_default_axis_names_of_an_import_are_identifiers():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 6])
    w = helper.make_tensor("fc.weight", onnx.TensorProto.FLOAT, [5, 6], np.ones(30).tolist())
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 5])
    node = helper.make_node("Gemm", ["x", "fc.weight"], ["y"], transB=1)
    graph = helper.make_graph([node], "g", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    (out,) = ng.from_onnx(model)
    for node in ng.toposort([out]):
        for axis in node.axes:
            assert axis.name.isidentifier(), axis.name
    assert "fc_weight_d0" in out.axes.names


def test_show_prints_a_small_array_attribute_by_its_values(cli):
    a = ng.make_axis(3, "A")
    ng.save_graph("g.json", [ng.constant(np.array([3.0, 0.0, 1.0]), [a]) + 1.0])
    res = cli("show", "g.json")
    assert "value=[3.0, 0.0, 1.0]" in res.out and "array[3]" not in res.out


def test_run_names_an_onnx_models_outputs_by_their_names(cli, tmp_path):
    _relu_model(tmp_path / "m.onnx", [2, 3], name="probs")
    np.save(tmp_path / "x.npy", np.arange(-3.0, 3.0, dtype=np.float32).reshape(2, 3))
    res = cli("run", "m.onnx", "--feed", "x=x.npy")
    assert res.code == 0 and res.out.startswith("output probs: ")
    assert cli("run", "m.onnx", "--feed", "x=x.npy", "-o", "o.npz").code == 0
    assert list(np.load(tmp_path / "o.npz")) == ["probs"]


def test_relu_of_a_negative_number_is_plus_zero():
    a = ng.make_axis(3, "A")
    x = ng.placeholder([a], name="x")
    feed = {"x": np.array([-1.0, -0.0, 2.0], np.float32)}
    relu, bprop = make_node("Relu", (x,)), make_node("ReluBprop", (x, x))
    got, grad = ng.execute([relu, bprop], feed)
    np.testing.assert_array_equal(got, [0, 0, 2])
    assert not np.signbit(got).any() and not np.signbit(grad).any()


def test_a_duplicate_rule_is_reported_once():
    with pytest.raises(ng.RuleErrors) as e:
        ng.parse_rules("pass p\nrule a: x * 1 => x\nrule a: x * 1 => x\n", "d.rules")
    assert len(e.value.errors) == 1 and "duplicate rule name 'a'" in str(e.value)


@pytest.mark.parametrize("op, change", [("Broadcast", "adds any axis"), ("Sum", "reduces")])
def test_replacing_a_broadcast_or_a_reduction_by_its_operand_is_caught(op, change):
    with pytest.raises(ng.RuleErrors, match=change):
        ng.parse_rules(f"pass p\nrule a: {op}(x) => x\n", "b.rules")


def test_apply_prints_what_fired_even_when_the_export_fails(cli, tmp_path):
    v = ng.variable([ng.make_axis(3, "A")], initial_value=np.ones(3), name="v")
    ng.save_graph("g.json", [ng.value_of(v) * 1.0])  # no ONNX for ValueOf
    res = cli("apply", "g.json", "-o", "out.onnx")
    assert res.code == 2 and "fired" in res.out and "mul_one" in res.out
    assert not (tmp_path / "out.onnx").exists()


def test_a_graph_is_never_written_under_a_name_that_hides_its_format(cli, tmp_path):
    _graph()
    res = cli("apply", "g.json", "-o", "out.txt")
    assert res.code == 2 and ".json" in res.err and not (tmp_path / "out.txt").exists()
    assert cli("import", "g.json", "-o", "out.txt").code == 2
