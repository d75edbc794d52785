"""The round trip with no rule writes each op back as itself (issue 34, item 2): the ops that
came back as other ops before (a training op lowered to Mul/Add, GlobalAveragePool as
ReduceMean + Unsqueeze, an Einsum that transposes as a Transpose, a Tile, a SpaceToDepth,
a float Mod with fmod=0, a Flatten with axis 0 as a Reshape, a Reshape as a Flatten,
MeanVarianceNormalization), equal under onnxruntime (or onnx's reference evaluator where
onnxruntime runs neither the model nor its copy)."""

import warnings
from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_cases import node_model, run_ort  # noqa: E402

from ngrules.interop.onnx.exporter import to_onnx  # noqa: E402
from ngrules.interop.onnx.exporting.passes.refused import RefusedAsRead  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402

RNG = np.random.default_rng(0)


def _back(model, **options):
    imported = import_model(model)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    return to_onnx(imported.outputs, output_names=imported.output_names, opset=opset, **options)


def _ops(model) -> Counter:
    return Counter(n.op_type for n in model.graph.node)


def _same_under_ort(model, feeds, rtol=1e-6):
    out = _back(model)
    assert _ops(out) == _ops(model), helper.printable_graph(out.graph)
    for got, want in zip(run_ort(out, feeds), run_ort(model, feeds)):
        np.testing.assert_allclose(got, want, rtol=rtol)
    return out


def _x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pooling_comes_back_as_itself(op):
    _same_under_ort(node_model(op, {"x": _x(1, 3, 5, 5)}), {"x": _x(1, 3, 5, 5)})


@pytest.mark.parametrize("op, attrs, feeds, inits", [
    ("Einsum", {"equation": "ij->ji"}, {"x": _x(3, 4)}, {}),
    ("Tile", {}, {"x": _x(2, 3)}, {"r": np.array([2, 3])}),
    ("SpaceToDepth", {"blocksize": 2}, {"x": _x(2, 2, 6, 6)}, {}),
])
def test_an_op_that_only_moves_data_comes_back_as_itself(op, attrs, feeds, inits):
    out = _same_under_ort(node_model(op, feeds, inits, **attrs), feeds)
    assert [n.op_type for n in out.graph.node] == [op]


def test_a_float_mod_with_fmod_0_is_one_mod_from_opset_28():
    """ONNX's Mod defines fmod=0 for floats from opset 28 (onnxruntime runs it); before, the
    exporter writes x - y * floor(x / y)."""
    feeds = {"a": _x(2, 3), "b": _x(2, 3) + 3}
    model = node_model("Mod", feeds, opset=28)
    out = _same_under_ort(model, feeds, rtol=1e-5)
    assert [(n.op_type, [a.i for a in n.attribute]) for n in out.graph.node] == [("Mod", [])]


def _reshape_model(op, shape, target):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, target)
    if op == "Flatten":
        nodes, inits = [helper.make_node("Flatten", ["x"], ["y"], axis=0)], []
    else:
        nodes = [helper.make_node("Reshape", ["x", "s"], ["y"])]
        inits = [numpy_helper.from_array(np.array(target), "s")]
    graph = helper.make_graph(nodes, "g", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("op, shape, target", [("Flatten", [2, 3, 4], [1, 24]),
                                               ("Reshape", [2, 3, 4], [2, 12])])
def test_a_flatten_and_a_reshape_come_back_as_read(op, shape, target):
    """A Flatten with axis 0 (a Reshape to the layout) and a Reshape that a Flatten could be."""
    model = _reshape_model(op, shape, target)
    out = _same_under_ort(model, {"x": _x(*shape)})
    assert [n.op_type for n in out.graph.node] == [op]
    assert len(out.graph.initializer) == len(model.graph.initializer)


def test_a_training_op_comes_back_as_itself_with_a_warning():
    """Adagrad (ai.onnx.preview.training), which onnxruntime does not run: written back as one
    node, with a warning that onnxruntime refuses the input as well; onnx's reference
    evaluator gives the same values for both."""
    from onnx.reference import ReferenceEvaluator

    names = ["r", "t", "x", "g", "h"]
    feeds = {"r": np.array(0.1, np.float32), "t": np.array(0, np.int64), "x": _x(3),
             "g": _x(3), "h": np.abs(_x(3))}
    inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                            v.shape) for k, v in feeds.items()]
    node = helper.make_node("Adagrad", names, ["x_new", "h_new"], decay_factor=0.1,
                            epsilon=1e-5, norm_coefficient=0.001,
                            domain="ai.onnx.preview.training")
    outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [3]) for o in ("x_new",
                                                                                   "h_new")]
    model = helper.make_model(helper.make_graph([node], "g", inputs, outputs), opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.preview.training", 1)])
    imported = import_model(model, constants={"t": feeds["t"]})
    with pytest.warns(RefusedAsRead, match="no kernel for Adagrad"):
        out = to_onnx(imported.outputs, output_names=imported.output_names)
    assert [(n.op_type, n.domain) for n in out.graph.node] == [
        ("Adagrad", "ai.onnx.preview.training")]
    used = {i.name for i in out.graph.input}
    got = ReferenceEvaluator(out).run(None, {k: v for k, v in feeds.items() if k in used})
    want = ReferenceEvaluator(model).run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_mean_variance_normalization_comes_back_as_itself():
    """onnx's strict inference refuses MeanVarianceNormalization's body at opset 13 in the
    model read as in the copy: written with a warning; onnxruntime runs both alike."""
    feeds = {"x": _x(2, 3, 4, 4)}
    model = node_model("MeanVarianceNormalization", feeds, opset=13)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RefusedAsRead)
        _same_under_ort(model, feeds, rtol=1e-5)
    assert any("onnx's checker refuses the input model as well" in str(w.message)
               for w in caught)
