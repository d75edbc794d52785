"""The round trip with no rule writes a model's own Transpose pair around a LogSoftmax (ONNX's
expanded softmax cross-entropy: Reshape to (N, C, D), Transpose to (N, D, C), LogSoftmax on the
last axis, Transpose back, Reshape): issue 34, item 2. A pipeline whose rules
change the chain still writes it as the one node it is."""

from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_cases import run_ort  # noqa: E402

from ngrules.interop.onnx.exporter import to_onnx  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402


def _sce_body(shape, op="LogSoftmax", inverse=True):
    """x of `shape` (N, C, d...) normalised over C the way the expanded body does it (without
    `inverse`, the second Transpose is another one and the result is in its order)."""
    n, c = shape[0], shape[1]
    d = int(np.prod(shape[2:], dtype=np.int64))
    target = numpy_helper.from_array(np.array([n, c, d], np.int64))
    m = helper.make_node
    nodes = [m("Constant", [], ["s3"], value=target), m("Reshape", ["x", "s3"], ["ncd"]),
             m("Transpose", ["ncd"], ["ndc"], perm=[0, 2, 1]), m(op, ["ndc"], ["sm"], axis=2),
             m("Transpose", ["sm"], ["back"], perm=[0, 2, 1] if inverse else [1, 2, 0]),
             m("Shape", ["x"], ["xs"])]
    nodes.append(m("Reshape", ["back", "xs"], ["y"]) if inverse else
                 m("Identity", ["back"], ["y"]))
    out = list(shape) if inverse else [d, c, n]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _normalised(x, op):
    shifted = x - x.max(axis=1, keepdims=True)
    total = np.exp(shifted).sum(axis=1, keepdims=True)
    return shifted - np.log(total) if op == "LogSoftmax" else np.exp(shifted) / total


def _ops(model):
    return Counter(n.op_type for n in model.graph.node if n.op_type != "Constant")


@pytest.mark.parametrize("shape", [(3, 5, 2), (3, 5), (2, 4, 1, 3)])
def test_the_models_transpose_pair_comes_back(shape, op="LogSoftmax"):
    """(3, 5): the Reshape only inserts a unit dimension and stays the model's Reshape."""
    model = _sce_body(shape, op)
    imported = import_model(model)
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    assert _ops(out) == _ops(model)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = run_ort(out, {"x": x})[0]
    np.testing.assert_allclose(got, _normalised(x, op), rtol=1e-5, atol=1e-6)


def test_a_transpose_that_is_not_the_inverse_is_laid_out_as_before():
    model = _sce_body((3, 5, 2), inverse=False)
    imported = import_model(model)
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    x = np.random.default_rng(1).standard_normal((3, 5, 2)).astype(np.float32)
    got = run_ort(out, {"x": x})[0]
    want = _normalised(x, "LogSoftmax").transpose(0, 2, 1).transpose(1, 2, 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert _ops(out)["Transpose"] <= 1


@pytest.mark.parametrize("pipeline", ["cpu", "inference"])
def test_a_pipeline_whose_rules_change_the_chain_writes_one_node(pipeline):
    import ngrules as ng
    from ngrules.lang.library import load_library

    imported = import_model(_sce_body((3, 5, 2)))
    outputs = ng.rewrite(imported.outputs, load_library(), pipeline=pipeline).outputs
    out = to_onnx(outputs, output_names=imported.output_names)
    assert [n.op_type for n in out.graph.node] == ["LogSoftmax"]
