"""A model is written back at its own opset, below 17 too
(`interop.onnx.exporting.passes.downgrade`): each node in the form its opset defines, the values
onnxruntime computes unchanged; a node the older opset cannot hold is an error naming it, never a
model at another opset."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ngrules.errors import NgrulesError  # noqa: E402
from ngrules.interop.onnx.exporter import to_onnx  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402


def _opset9_model():
    """An opset-9 model with the ops whose forms changed after 9: Unsqueeze, Squeeze and
    ReduceSum with axes attributes, Slice and Pad and Clip with attributes, Softmax-1 over the
    last axis, a Gemm and a Relu."""
    w = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "w")
    b = numpy_helper.from_array(np.float32([0.1, -0.2, 0.3]), "b")
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["g"]),
        helper.make_node("Relu", ["g"], ["r"]),
        helper.make_node("Unsqueeze", ["r"], ["u"], axes=[0]),
        helper.make_node("Pad", ["u"], ["p"], pads=[0, 0, 1, 0, 0, 1], value=0.5),
        helper.make_node("Clip", ["p"], ["c"], min=0.1, max=2.0),
        helper.make_node("Slice", ["c"], ["s"], starts=[1], ends=[4], axes=[2]),
        helper.make_node("Squeeze", ["s"], ["q"], axes=[0]),
        helper.make_node("Softmax", ["q"], ["y"], axis=1),
        helper.make_node("ReduceSum", ["q"], ["z"], axes=[1], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "old", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 4
    onnx.checker.check_model(model, full_check=True)
    return model


def _run(model, x):
    return ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})


def _attrs(model, op):
    node = next(n for n in model.graph.node if n.op_type == op)
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}, len(node.input)


def test_an_opset9_model_is_written_back_at_opset9_in_its_forms():
    from ngrules.cli.graphio import written_opset

    model = _opset9_model()
    imported = import_model(model)
    assert imported.opset == 9 and written_opset(None, imported.opset) == 9
    out = to_onnx(imported.outputs, output_names=imported.output_names, opset=9)
    assert [(o.domain, o.version) for o in out.opset_import] == [("", 9)]
    onnx.checker.check_model(out, full_check=True)
    ops = [n.op_type for n in out.graph.node]
    assert "Softmax" in ops and "ReduceSum" in ops
    for op, attr in (("Softmax", "axis"), ("ReduceSum", "axes")):
        assert attr in _attrs(out, op)[0], op  # the opset-9 form: an attribute, one input
        assert _attrs(out, op)[1] == 1, op
    assert all(len(n.input) == 1 for n in out.graph.node if n.op_type in ("Squeeze",
               "Unsqueeze", "Pad", "Clip", "Slice"))
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    for want, got in zip(_run(model, x), _run(out, x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_asked_opset_17_converts_an_opset9_model():
    model = _opset9_model()
    imported = import_model(model)
    out = to_onnx(imported.outputs, output_names=imported.output_names, opset=17)
    assert [(o.domain, o.version) for o in out.opset_import] == [("", 17)]
    x = np.ones((2, 4), np.float32)
    for want, got in zip(_run(model, x), _run(out, x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_node_the_older_opset_cannot_hold_is_an_error_naming_it():
    """A Softmax over the first of two axes is not Softmax-1's (it flattens from the axis on),
    and Mod does not exist at opset 9: each names its node and the opset."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    for node, why in ((helper.make_node("Softmax", ["x"], ["y"], axis=0, name="sm"),
                       "normalises over every dimension"),
                      (helper.make_node("Mod", ["x", "x"], ["y"], fmod=1, name="md"),
                       "does not exist")):
        graph = helper.make_graph([node], "g", [x], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [2, 3])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        imported = import_model(model)
        with pytest.raises(NgrulesError, match=rf"{node.op_type} node .* at opset 9 .*{why}"):
            to_onnx(imported.outputs, output_names=imported.output_names, opset=9)


def test_apply_keeps_an_opset9_model_at_9_and_opset_converts(tmp_path, monkeypatch):
    from ngrules.cli import main

    monkeypatch.chdir(tmp_path)
    onnx.save(_opset9_model(), "old.onnx")
    for extra, opset in (((), 9), (("--opset", "13"), 13)):
        assert main(["apply", "old.onnx", "-o", "out.onnx", *extra]) == 0
        out = onnx.load("out.onnx")
        assert {o.domain: o.version for o in out.opset_import}[""] == opset


def test_an_opset9_classifier_head_comes_back_as_its_own_nodes():
    """AveragePool, a Reshape dropping the unit dimensions, Gemm, Softmax (the light networks'
    head): the same op types at opset 9 (the Reshape is the model's own, not a Squeeze)."""
    w = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), "w")
    b = numpy_helper.from_array(np.float32([0.1, -0.2, 0.3]), "b")
    shape = numpy_helper.from_array(np.int64([1, 4]), "shape")
    nodes = [helper.make_node("AveragePool", ["x"], ["p"], kernel_shape=[2, 2]),
             helper.make_node("Reshape", ["p", "shape"], ["r"]),
             helper.make_node("Gemm", ["r", "w", "b"], ["g"], transB=1),
             helper.make_node("Softmax", ["g"], ["y"], axis=1)]
    graph = helper.make_graph(
        nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [w, b, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 4
    imported = import_model(model)
    out = to_onnx(imported.outputs, output_names=imported.output_names, opset=9)
    assert [n.op_type for n in out.graph.node] == [n.op_type for n in model.graph.node]
    x = np.random.default_rng(1).standard_normal((1, 4, 2, 2)).astype(np.float32)
    np.testing.assert_allclose(_run(out, x)[0], _run(model, x)[0], rtol=1e-5, atol=1e-6)


def test_an_opset9_softmax_over_several_dimensions_comes_back_as_one_node():
    """Softmax-1 over axis 1 of a 4-D input normalises over dimensions 1 to 3 together: kept
    whole (`composites.FLATTENING`), it is one node again at opset 9, not the five of its body."""
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["y"], axis=1)], "sm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 2, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    imported = import_model(model)
    out = to_onnx(imported.outputs, output_names=imported.output_names, opset=9)
    assert [n.op_type for n in out.graph.node] == ["Softmax"]
    x = np.random.default_rng(2).standard_normal((2, 3, 2, 2)).astype(np.float32)
    want = np.exp(x) / np.exp(x).sum(axis=(1, 2, 3), keepdims=True)
    np.testing.assert_allclose(_run(out, x)[0], want, rtol=1e-5, atol=1e-6)
