"""Declared ops written to ONNX with no Python: the `onnx` clause, and functions of the body."""

import collections

import numpy as np
import pytest

import ngrules as ng
from ngrules.errors import RuleErrors, RuleSyntaxError
from ngrules.ir.ops import OPS
from ngrules.lang.layout import format_rules
from ngrules.lang.parser import parse
from ngrules.lsp.analysis import Document

ACTS = """\
op OxLeaky(x, slope: float = 0.01) = Maximum(x, x * slope) onnx LeakyRelu(alpha=slope)
op OxSilu(x) = x * Sigmoid(x)
op OxMish(x) = x * Tanh(Log(1 + Exp(x))) onnx Mish

pass fuse

rule ox_silu:  x * Sigmoid(x)      => OxSilu(x)
rule ox_leaky: Maximum(x, x * 0.2) => OxLeaky(x, slope=0.2)
"""


@pytest.fixture
def acts(tmp_path):
    path = tmp_path / "acts.rules"
    path.write_text(ACTS)
    return ng.load_rules(path)


def test_the_clause_parses_and_formats_back():
    decl = parse(ACTS, "acts.rules").decls[0]
    assert decl.onnx.op == "LeakyRelu" and decl.onnx.domain == ""
    assert [k for k, _ in decl.onnx.attrs] == ["alpha"]
    assert format_rules(parse(ACTS, "acts.rules")) == ACTS
    other = parse("op OxG(a, b) = Dot(a, b) onnx com.example.MyGemm\n", "t.rules").decls[0]
    assert (other.onnx.domain, other.onnx.op) == ("com.example", "MyGemm")
    long_body = " + ".join(["Exp(x)"] * 14)
    text = format_rules(parse(f"op OxLong(x) = {long_body} onnx Exp\n", "t.rules"))
    assert text.splitlines()[-1] == "    onnx Exp"  # its own line under a long body
    assert format_rules(parse(text, "t.rules")) == text


def test_attributes_are_given_by_name():
    with pytest.raises(RuleSyntaxError, match="given by name") as caught:
        parse("op OxA(x) = x onnx Foo(1)", "t.rules")
    assert caught.value.span.col == 24


def test_the_checker_refuses_attributes_that_read_tensors_or_repeat(tmp_path):
    path = tmp_path / "bad.rules"
    path.write_text(
        "op OxBad(x, s: float = 0.1) = x * s onnx LeakyRelu(alpha=x, alpha=s, beta=q)\n"
        "op OxBad2(x) = x onnx leakyRelu\n"
    )
    with pytest.raises(RuleErrors) as caught:
        ng.load_rules(path)
    messages = [e.message for e in caught.value.errors]
    assert any("reads tensor parameter 'x'" in m for m in messages)
    assert any("'alpha' is given twice" in m for m in messages)
    assert any("'q' is never bound" in m for m in messages)
    assert any("must start with a capital letter" in m for m in messages)
    assert "OxBad" not in OPS  # a declaration with problems registers nothing


def _model_using_the_ops():
    A, B = ng.make_axis(3, "A"), ng.make_axis(4, "B")
    x = ng.placeholder([A, B], name="x")
    xt = ng.axes_with_order(x, [B, A])
    y = (ng.make_node("Maximum", (x, x * 0.2)) + x * ng.make_node("Sigmoid", (x,))
         + ng.make_node("OxMish", (xt,)) + ng.make_node("Sigmoid", (xt,)) * xt)
    return x, y


def test_a_graph_applying_declared_ops_exports_from_the_rules_file_alone(acts):
    ort = pytest.importorskip("onnxruntime")
    x, y = _model_using_the_ops()
    res = ng.rewrite([y], acts)
    assert res.fired() == {"ox_leaky": 1, "ox_silu": 2}
    model = ng.to_onnx(res.outputs)
    ops = collections.Counter((n.domain, n.op_type) for n in model.graph.node)
    assert ops[("", "LeakyRelu")] == 1  # named by its declaration
    # no clause: a function of the body; Mish is opset 18, so the function too; the silu on
    # [B, A] arguments, a view of x's [A, B] value, is called on that value as it is (the
    # body is elementwise): the same function, no Transpose in or out (one stays: the sum
    # adds terms in both orders)
    assert ops[("acts", "OxSilu")] == 2 and ops[("acts", "OxMish")] == 1
    assert ops[("", "Transpose")] == 1, ops
    assert {(f.domain, f.name) for f in model.functions} == {
        ("acts", "OxSilu"), ("acts", "OxMish")}
    assert "acts" in {o.domain for o in model.opset_import}
    leaky = next(n for n in model.graph.node if n.op_type == "LeakyRelu")
    assert leaky.attribute[0].name == "alpha" and leaky.attribute[0].f == pytest.approx(0.2)
    value = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    got = ort.InferenceSession(model.SerializeToString()).run(None, {"x": value})[0]
    np.testing.assert_allclose(got, ng.execute([y], {x: value})[0], rtol=1e-5, atol=1e-6)


def test_verify_checks_the_named_onnx_op_against_the_body(tmp_path):
    pytest.importorskip("onnxruntime")
    path = tmp_path / "named.rules"
    path.write_text(
        "op OxLeaky2(x, slope: float = 0.01) = Maximum(x, x * slope) onnx LeakyRelu(alpha=slope)\n"
        "op OxWrong(x) = x * Sigmoid(x) onnx Relu\n"
        "op OxMish2(x) = x * Tanh(Log(1 + Exp(x))) onnx Mish\n"
    )
    report = ng.verify(ng.load_rules(path))
    by_op = {k.op: k for k in report.kernels if k.what == "onnx"}
    assert by_op["OxLeaky2"].ok and not by_op["OxLeaky2"].unverified
    assert str(by_op["OxLeaky2"]).startswith("verified      onnx OxLeaky2")
    assert not by_op["OxWrong"].ok and "max |onnx - body|" in str(by_op["OxWrong"])
    assert by_op["OxMish2"].unverified and "opset 17" in str(by_op["OxMish2"])
    assert not report.ok


def test_the_language_server_shows_the_clause():
    doc = Document(ACTS, "acts.rules")
    assert not doc.errors
    line = ACTS.splitlines()[0]
    keyword = doc.hover(0, line.index("onnx") + 1)
    assert "ONNX op that computes the declared op" in keyword
    rule_line = next(i for i, t in enumerate(ACTS.splitlines()) if t.startswith("rule ox_leaky"))
    text = ACTS.splitlines()[rule_line]
    op_hover = doc.hover(rule_line, text.index("OxLeaky") + 2)
    assert "onnx LeakyRelu(alpha=slope)" in op_hover


def test_what_the_named_op_cannot_compute_is_an_export_error(tmp_path):
    pytest.importorskip("onnx")
    from ngrules.interop.onnx import OnnxError

    path = tmp_path / "axes_attr.rules"
    path.write_text(
        "op OxSum(x, r: axes) = Sum(x, reduction_axes=r) onnx ReduceSum\n"
        "op OxKeep(x, r: axes) = x onnx Relu(keep=r)\n"
    )
    ng.load_rules(path)
    A, B = ng.make_axis(3, "A"), ng.make_axis(4, "B")
    x = ng.placeholder([A, B], name="x")
    reduced = ng.make_node("OxSum", (x,), r=ng.make_axes([A]))
    with pytest.raises(OnnxError, match="are not among the output's"):  # positions differ
        ng.to_onnx([reduced])
    kept = ng.make_node("OxKeep", (x,), r=ng.make_axes([A]))
    with pytest.raises(OnnxError, match="cannot write .* as ONNX Relu: attributes"):
        ng.to_onnx([kept])
