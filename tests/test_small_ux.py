"""The small things a new user trips on (issue 38): float64 constants, rule sets printed as
rules, the symbol whose length is missing, shipped rules' locations, ONNX ops of a newer opset
verified at that opset."""

import numpy as np
import pytest

import ngrules as ng
from ngrules.errors import NgrulesError
from ngrules.lang.loader import parse_rules

C, N = ng.make_axis(4, "C"), ng.make_axis(3, "N")


def test_a_float64_array_stays_float64_and_meets_float32_tensors_as_a_number_does():
    w = ng.constant(np.linspace(0.1, 0.4, 4), [C])
    assert w.dtype == np.float64
    x64 = ng.placeholder([C, N], dtype=np.float64, name="x64")
    x = ng.placeholder([C, N], name="x")
    value = np.arange(12.0).reshape(4, 3)
    (got,) = ng.execute([ng.dot(w, x64)], {"x64": value})
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.linspace(0.1, 0.4, 4) @ value, rtol=1e-15)
    # beside float32 tensors it is float32, as a Python number is (the README's example)
    assert ng.dot(w, x).dtype == np.float32 and (x * w).dtype == np.float32
    (y,) = ng.execute([w + x], {"x": value.astype(np.float32)})
    np.testing.assert_allclose(y, value + np.linspace(0.1, 0.4, 4)[:, None], rtol=1e-6)
    assert ng.constant([1.0, 2.0, 3.0, 4.0], [C]).dtype == np.float32  # lists: ngraph's default


def test_printing_a_rule_set_shows_its_rules_as_text():
    rules = parse_rules(
        "pass p\nrule mul_one: x * 1 => x\nrule g: s @ Sum(x) if len(s.reduction_axes) == 1 "
        "=> s\npipeline main: p\n", "t.rules")
    text = str(rules)
    assert text.splitlines() == [
        "pass p", "", "# t.rules:2", "rule mul_one: x * 1 => x", "# t.rules:3",
        "rule g:", "    s @ Sum(x)", "    if len(s.reduction_axes) == 1", "    => s",
        "pipeline main: p",
    ]
    assert "RuleDecl" not in text and parse_rules(text, "again.rules").pipelines == {
        "main": ("p",)}


def test_the_missing_length_message_names_the_symbol_not_given():
    onnx = pytest.importorskip("onnx")
    from onnx import helper

    x = helper.make_tensor_value_info("x", 1, ["batch", "seq"])
    y = helper.make_tensor_value_info("y", 1, ["batch", "seq"])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    from ngrules.interop.onnx.importer import from_onnx

    with pytest.raises(NgrulesError) as given_batch:
        from_onnx(model, lengths={"batch": 2})
    assert "give the length of 'seq'" in given_batch.value.message
    with pytest.raises(NgrulesError) as given_none:
        from_onnx(model)
    assert "give the length of 'batch'" in given_none.value.message
    (out,) = from_onnx(model, lengths={"batch": 2, "seq": 5})
    assert out.axes.lengths == (2, 5)


def test_an_onnx_op_of_a_newer_opset_is_verified_at_that_opset(scratch_ops):
    pytest.importorskip("onnxruntime")
    from ngrules.verification.onnxops import verify_onnx_op

    parse_rules("op UxMish(x) = x * Tanh(Log(Exp(x) + 1)) onnx Mish\n"
                "op UxNotMish(x) = x * Tanh(Exp(x)) onnx Mish\n", "m.rules")
    at17 = verify_onnx_op("UxMish", examples=5)
    assert at17.unverified and "opset 17" in at17.unverified and "--opset" in at17.unverified
    at18 = verify_onnx_op("UxMish", examples=5, opset=18)  # Mish is in opset 18
    assert at18.ok and not at18.unverified
    wrong = verify_onnx_op("UxNotMish", examples=5, opset=18)
    assert not wrong.ok


def test_a_computation_on_float64_constants_meets_a_float32_tensor_in_float32():
    s = ng.constant(np.arange(1.0, 5.0), [C])
    x = ng.placeholder([C], name="x")
    y = ng.dot(x, ng.sqrt(s) * 2.0)  # the float64 computation is built again in float32
    assert y.dtype == np.float32 and y.args[1].op == "Multiply"  # rebuilt on float32 constants
    (got,) = ng.execute([y], {"x": np.ones(4, np.float32)})
    np.testing.assert_allclose(got, np.sum(np.sqrt(np.arange(1.0, 5.0)) * 2.0), rtol=1e-6)
    with pytest.raises(NgrulesError, match="mix dtypes"):  # two tensors: never cast silently
        ng.placeholder([C], dtype=np.float64) + x


def test_a_warning_at_a_shipped_rule_names_it_by_its_library_location():
    from ngrules.engine.compiled import RuleStats
    from ngrules.errors import RuleError, Span
    from ngrules.lang.library import library_path

    result = ng.rewrite([ng.placeholder([C], name="p")], parse_rules("rule r: x * 1 => x", "t"))
    stats = RuleStats(failures=2, first_failure=RuleError(
        "pow overflows", Span(str(library_path() / "simplify.rules"), 12, 5)))
    result.stats["mul_zero"] = stats
    assert result.warnings == [
        "ngrules:rules/simplify.rules:12:5: warning: pow overflows (match rejected; 2 rejected "
        "in all)"]
