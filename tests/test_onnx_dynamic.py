"""Dynamic dimensions stay dynamic: a symbolic batch imported with no length, rewritten and
written back keeps its `dim_param` and runs at any batch size; rules cannot read its length."""

import numpy as np
import pytest

import ngrules as ng
from ngrules.ir import symbolic
from ngrules.ir.symbolic import UnknownLength

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from ngrules.cli.main import main  # noqa: E402
from ngrules.interop.onnx import examples  # noqa: E402
from ngrules.interop.onnx.exporter import to_onnx  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402


def _dims(values):
    return [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in values]


def _run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _equal_at_batch_sizes(original, rewritten, sizes=(1, 5)):
    rng = np.random.default_rng(0)
    for size in sizes:
        feeds = {
            i.name: rng.standard_normal(
                [d.dim_value or size for d in i.type.tensor_type.shape.dim]
            ).astype(np.float32)
            for i in original.graph.input
        }
        np.testing.assert_allclose(_run(rewritten, feeds), _run(original, feeds),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("build, pipeline, symbol", [
    (examples.cnn, "inference", "N"),
    (examples.resnet, "inference", "N"),
    (examples.mlp, "cpu", "N"),
    (examples.transformer, "fuse_nn", "B"),
])
def test_a_symbolic_batch_is_kept_and_the_model_runs_at_two_batch_sizes(build, pipeline, symbol):
    model = build()
    imported = import_model(model, symbolic=True)
    res = ng.rewrite(imported.outputs, ng.load_library(), pipeline=pipeline)
    assert res.stop == "fixpoint" and res.warnings == []
    out = to_onnx(res.outputs, output_names=imported.output_names)
    assert _dims(out.graph.input) == _dims(model.graph.input)
    assert [d[0] for d in _dims(out.graph.output)] == [symbol]
    _equal_at_batch_sizes(model, out)
    if pipeline == "fuse_nn":  # the layer norm's guard counts the normalised axes only
        assert res.fired()["layer_norm"] == 2


def test_apply_without_length_keeps_the_batch_and_with_it_fixes_it(tmp_path, monkeypatch, capsys):
    model = examples.cnn()
    onnx.save(model, tmp_path / "cnn.onnx")
    monkeypatch.chdir(tmp_path)
    assert main(["apply", "cnn.onnx", "-o", "out.onnx", "--pipeline", "inference"]) == 0
    out = onnx.load(tmp_path / "out.onnx")
    assert _dims(out.graph.input) == [["N", 3, 16, 16]] and _dims(out.graph.output) == [["N", 10]]
    _equal_at_batch_sizes(model, out, sizes=(2, 7))
    assert "Sqrt" not in {n.op_type for n in out.graph.node}  # folded as well
    assert main(["apply", "cnn.onnx", "-o", "fixed.onnx", "--length", "N=4"]) == 0
    fixed = onnx.load(tmp_path / "fixed.onnx")
    assert _dims(fixed.graph.input) == [[4, 3, 16, 16]]
    capsys.readouterr()


SMALL = """\
rule relu_small:  # pays only for small tensors
    Relu(x)
    if size(x) <= 4096
    => Maximum(x, 0)
"""


def test_a_guard_reading_a_symbolic_length_does_not_fire_and_explain_says_why(tmp_path):
    rules = ng.parse_rules(SMALL, str(tmp_path / "small.rules"))
    imported = import_model(examples.mlp(), symbolic=True)
    res = ng.rewrite(imported.outputs, rules)
    assert res.fired() == {}
    assert len(res.warnings) == 1 and "symbolic length 'N'" in res.warnings[0]
    text = str(ng.explain(rules.rule("relu_small"), imported.outputs))
    assert "matches at 0 node(s)" in text
    assert "depends on the symbolic length 'N'" in text and "size(x) <= 4096" in text
    static = import_model(examples.mlp(), lengths={"N": 4})
    assert ng.rewrite(static.outputs, rules).fired() == {"relu_small": 2}


def test_a_replacement_may_not_bake_a_symbolic_length_into_a_constant():
    """Σ over N of a constant is c·|N|: with N symbolic the rule must not fire."""
    simplify = ng.load_rules("ngrules:simplify.rules")
    C = ng.make_axis(3, "C")
    for length, fires in ((symbolic.stand_in("N"), False), (4, True)):
        N = ng.make_axis(length, "N")
        total = ng.sum(ng.constant(2.0, [N, C]), reduction_axes=[N])
        res = ng.rewrite([total], simplify)
        assert ("sum_const" in res.fired()) is fires


def test_stand_ins_are_primes_above_every_static_length_and_factor_back():
    n = symbolic.stand_in("N")
    assert n >= symbolic.FIRST_STAND_IN and symbolic.stand_in("N") == n
    s = symbolic.stand_in("S_dyn", above=n + 10)
    assert s > n + 10 and symbolic.STAND_INS[s] == "S_dyn"
    assert symbolic.factor(n * s * 12) == (12, ["N", "S_dyn"])
    assert symbolic.known(12) == 12
    with pytest.raises(UnknownLength, match="'N'"):
        symbolic.known((3, n * 4))
    with pytest.raises(UnknownLength, match="the count of a mean"):
        ng.mean(ng.placeholder([ng.make_axis(n, "N")]), reduction_axes=[ng.make_axis(n, "N")])


def test_without_symbolic_a_symbolic_dimension_still_needs_a_length():
    with pytest.raises(ng.NgrulesError, match="give the length of 'N'"):
        import_model(examples.mlp())


def test_a_models_own_minus_one_beside_a_symbolic_length_stays_one_minus_one():
    """GPT-2's `input_ids.view(-1, seq)` with symbolic batch and seq: the target keeps the
    model's -1 and reads seq at run time (it was written `[-1, -1]`, which onnx refuses)."""
    from onnx import TensorProto, helper

    def const(name, values):
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(
            name, TensorProto.INT64, [len(values)], values))

    nodes = [helper.make_node("Shape", ["x"], ["s"]), const("one", [1]),
             helper.make_node("Gather", ["s", "one"], ["seq"], axis=0), const("rest", [-1]),
             helper.make_node("Concat", ["rest", "seq"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    imported = import_model(model, symbolic=True)
    written = to_onnx(imported.outputs, output_names=imported.output_names, opset=17)
    for shape in [(1, 5), (3, 11)]:
        value = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(_run(written, {"x": value}), np.maximum(value, 0))
