"""The built-in pass `fold_constants`: constant subcomputations evaluated at rewrite time."""

import collections

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ngrules as ng
from ngrules.engine.folding import fold_constants
from ngrules.errors import NgrulesError, RuleErrors
from ngrules.ir.graph import substitute, toposort
from ngrules.testing import graphs

C, K = ng.make_axis(3, "C"), ng.make_axis(4, "K")


def _constants_for_some_inputs(instance, chosen):
    """The instance's graph with the chosen placeholders replaced by constants of their feeds."""
    inputs = [n for n in toposort(instance.outputs) if n.op == "Placeholder"]
    mapping = {
        p: ng.constant(instance.feeds[p], p.axes, dtype=p.dtype)
        for p, keep in zip(inputs, chosen)
        if keep
    }
    outputs = substitute(instance.outputs, mapping)
    feeds = {p: v for p, v in instance.feeds.items() if p not in mapping}
    return outputs, feeds


@given(graphs(max_depth=3), st.lists(st.booleans(), min_size=8, max_size=8))
def test_folding_preserves_the_values_of_random_graphs(instance, chosen):
    outputs, feeds = _constants_for_some_inputs(instance, chosen)
    folded = fold_constants(outputs)
    assert [o.axes for o in folded] == [o.axes for o in outputs]
    assert [o.dtype for o in folded] == [o.dtype for o in outputs]
    with np.errstate(all="ignore"):
        before = ng.execute(outputs, feeds)
        after = ng.execute(folded, feeds)
    for b, a in zip(before, after):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0, equal_nan=True)
    assert len(toposort(folded)) <= len(toposort(outputs))


def test_a_computation_on_constants_becomes_one_constant():
    s = ng.constant(np.arange(1.0, 5.0), [K])  # float32, as x
    w = ng.constant(np.arange(12.0).reshape(3, 4), [C, K])
    x = ng.placeholder([C])
    y = ng.dot(x, w * ng.broadcast(ng.sqrt(s), [C, K]))
    res = ng.rewrite([y], ng.load_rules("ngrules:simplify.rules"), passes=["fold_constants"])
    ops = collections.Counter(n.op for n in toposort(res.outputs))
    assert ops == {"Dot": 1, "Placeholder": 1, "Constant": 1}
    (folded,) = [n for n in toposort(res.outputs) if n.op == "Constant"]
    np.testing.assert_allclose(folded.attrs["value"], np.arange(12.0).reshape(3, 4) * np.sqrt(
        np.arange(1.0, 5.0)))
    assert [n.op for n, _ in res.folded] == ["Sqrt", "Multiply"]
    feed = {x: np.ones(3, np.float32)}
    np.testing.assert_allclose(ng.execute(res.outputs, feed), ng.execute([y], feed))


def test_the_size_bound_leaves_larger_values_alone():
    big = ng.constant(np.ones((3, 4)), [C, K])
    y = ng.exp(big) + ng.placeholder([C, K])
    assert fold_constants([y], limit=11)[0].args[0].op == "Exp"  # 12 elements > 11
    assert fold_constants([y], limit=12)[0].args[0].op == "Constant"
    lib = ng.load_rules("ngrules:simplify.rules")
    small = ng.rewrite([y], lib, passes=["fold_constants"], fold_limit=11)
    assert small.outputs[0].args[0].op == "Exp" and small.folded == []


def test_a_broadcast_scalar_is_not_grown_into_a_tensor():
    """A value may hold no more elements than its constant arguments: 2 * broadcast(3) over
    [C, K] stays a computation on one scalar each rather than 12 stored numbers."""
    two, three = ng.constant(2.0, [C, K]), ng.constant(3.0, [C, K])
    y = two * three
    assert fold_constants([y])[0].op == "Multiply"
    scalar = ng.constant(np.float32(2.0)) * ng.constant(np.float32(3.0))
    (folded,) = fold_constants([scalar])
    assert folded.op == "Constant" and float(folded.attrs["value"]) == 6.0


def test_variables_and_placeholders_are_not_folded():
    v = ng.variable([K], name="v", initial=1.0)
    y = ng.exp(v)
    assert fold_constants([y])[0].op == "Exp"


def test_pipelines_name_the_built_in_pass_and_rules_files_may_not_declare_it(tmp_path):
    f = tmp_path / "a.rules"
    f.write_text("rule r: x * 1 => x\npipeline p: a, fold_constants\n")
    assert ng.load_rules(f).pipelines["p"] == ("a", "fold_constants")
    f.write_text("pass fold_constants\nrule r: x * 1 => x\n")
    with pytest.raises(RuleErrors, match="pass 'fold_constants' is built in"):
        ng.load_rules(f)
    f.write_text("rule r: x * 1 => x\npipeline p: a, fold_constant\n")
    with pytest.raises(RuleErrors, match="did you mean 'fold_constants'"):
        ng.load_rules(f)
    with pytest.raises(NgrulesError, match="no pass named 'fold_constant'"):
        ng.rewrite([ng.placeholder([K])], ng.load_rules("ngrules:simplify.rules"),
                   passes=["fold_constant"])


def test_the_inference_pipeline_ends_with_folding():
    assert ng.load_library().pipelines["inference"][-1] == "fold_constants"


@pytest.mark.parametrize("name, convolutions", [("cnn", 2), ("resnet", 5)])
def test_the_conv_batchnorm_models_export_with_folded_weights(name, convolutions):
    """ResNet's conv + batchnorm: fold_batchnorm_convolution writes γ/√(σ²+ε) and w·s, the
    folding pass evaluates them: the graph keeps no Sqrt, the ONNX output has no Sqrt,
    Reciprocal or Mul, and the same values under onnxruntime."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from ngrules.interop.onnx import examples
    from ngrules.interop.onnx.exporter import to_onnx
    from ngrules.interop.onnx.importer import import_model

    model = getattr(examples, name)()
    imported = import_model(model, lengths={"N": 2})
    lib = ng.load_library()
    passes = list(lib.pipelines["inference"])
    unfolded = ng.rewrite(imported.outputs, lib, passes=passes[:-1])
    folded = ng.rewrite(imported.outputs, lib, pipeline="inference")
    assert folded.fired()["fold_batchnorm_convolution"] == convolutions
    out = to_onnx(folded.outputs, output_names=imported.output_names)
    ops = collections.Counter(n.op_type for n in out.graph.node)
    assert not {"Sqrt", "Reciprocal", "Mul", "BatchNormalization"} & set(ops)
    assert ops["Conv"] == convolutions
    computed = {n.op for n in ng.toposort(unfolded.outputs)}
    assert {"Sqrt", "Multiply"} <= computed
    assert not {"Sqrt", "Reciprocal"} & {n.op for n in ng.toposort(folded.outputs)}
    # the exporter writes small constant computations as their values too: no larger
    before = to_onnx(unfolded.outputs, output_names=imported.output_names)
    assert len(out.graph.node) <= len(before.graph.node)
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    got = ort.InferenceSession(out.SerializeToString()).run(None, {out.graph.input[0].name: x})
    np.testing.assert_allclose(got[0], expected, rtol=1e-4, atol=1e-5)


def test_apply_takes_a_fold_limit_and_says_how_many_it_folded(tmp_path, monkeypatch, capsys):
    onnx = pytest.importorskip("onnx")
    from ngrules.cli.main import main
    from ngrules.interop.onnx import examples

    onnx.save(examples.cnn(), tmp_path / "cnn.onnx")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["apply", "cnn.onnx", "-o", "a.onnx", "--pipeline", "inference"]) == 0
    # 12: the folded scale w·(1/√(v+ε)) is w/√(v+ε) after `divide_form` (one computation less each)
    assert "folded    12  constant computations" in capsys.readouterr().out
    assert "Sqrt" not in {n.op_type for n in onnx.load(tmp_path / "a.onnx").graph.node}
    # a graph file shows the pass's limit (an ONNX file would not: the exporter writes small
    # constant computations as their values itself)
    args = ["apply", "cnn.onnx", "-o", "b.json", "--pipeline", "inference", "--fold-limit", "1",
            "--length", "N=2"]
    assert main(args) == 0
    assert '"Sqrt"' in (tmp_path / "b.json").read_text()
    with pytest.raises(SystemExit):
        main(["apply", "cnn.onnx", "-o", "c.onnx", "--fold-limit", "lots"])


def test_the_language_server_explains_the_built_in_pass():
    from ngrules.lsp.analysis import Document

    text = "rule r: x * 1 => x\npipeline p: main, fold_constants\n"
    doc = Document(text, "main.rules")
    assert not doc.errors
    hover = doc.hover(1, text.splitlines()[1].index("fold_constants") + 3)
    assert "built-in pass `fold_constants`" in hover
