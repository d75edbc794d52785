"""Gather with run-time indices (the Gather op, differentiable into a ScatterAdd),
GatherElements and GatherND, against onnxruntime."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_cases import check_against_ort, node_model  # noqa: E402

import ngrules as ng  # noqa: E402

RNG = np.random.default_rng(0)


def test_embedding_lookup_with_run_time_ids_is_one_gather():
    table = RNG.standard_normal((10, 4)).astype(np.float32)
    ids = np.array([[1, 9, -1], [0, 3, 3]], np.int64)
    outputs = check_against_ort(_embedding(table), {"ids": ids})
    assert [n.op for n in ng.toposort(outputs)].count("Gather") == 1


def _embedding(table):
    from onnx import helper, numpy_helper, shape_inference

    node = helper.make_node("Gather", ["table", "ids"], ["y"], axis=0)
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("ids", 7, [2, 3])],
                              [helper.make_tensor_value_info("y", 1, None)],
                              [numpy_helper.from_array(table, "table")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return shape_inference.infer_shapes(m)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_on_any_axis_with_run_time_indices(axis):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    n = x.shape[axis]
    i = np.array([[0, n - 1], [-1, 1]], np.int64)
    check_against_ort(node_model("Gather", {"x": x, "i": i}, axis=axis), {"x": x, "i": i})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(axis):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    shape = list(x.shape)
    shape[axis] = 5
    i = RNG.integers(-x.shape[axis], x.shape[axis], shape).astype(np.int64)
    check_against_ort(node_model("GatherElements", {"x": x, "i": i}, axis=axis), {"x": x, "i": i})


@pytest.mark.parametrize(
    "data_shape, index, batch_dims",
    [((2, 3), [[0, 1], [1, -1]], 0), ((2, 3, 4), [[1], [0]], 0),
     ((2, 3, 4), [[[0, 1]], [[1, 2]]], 0), ((2, 3, 4), [[1], [2]], 1)],
)
def test_gather_nd(data_shape, index, batch_dims):
    x = RNG.standard_normal(data_shape).astype(np.float32)
    i = np.array(index, np.int64)
    check_against_ort(node_model("GatherND", {"x": x, "i": i}, batch_dims=batch_dims),
                      {"x": x, "i": i})


def test_gather_gradient_is_a_scatter_add_summing_repeated_indices():
    x = ng.placeholder({"V": 4, "E": 2}, np.float64, name="x")
    i = ng.constant(np.array([1, 3, 1]), ng.make_axes({"T": 3}), dtype=np.int64)
    y = ng.make_node("Gather", (x, i), axis=x.axes[0])
    g = ng.deriv(ng.sum(y, out_axes=()), x)
    assert "ScatterAdd" in {n.op for n in ng.toposort([g])}
    got = ng.execute([g], {})[0]  # the gradient of a linear map does not read x
    np.testing.assert_array_equal(got, [[0, 0], [2, 2], [0, 0], [1, 1]])


@pytest.mark.parametrize("reduction", ["none", "add"])
@pytest.mark.parametrize("axis", [0, 1])
def test_scatter_elements(reduction, axis):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    i = np.array([[0, 1, 2], [2, 0, -2]], np.int64) if axis == 0 else np.array(
        [[3, 0], [1, 2], [-1, 0]], np.int64)
    u = RNG.standard_normal(i.shape).astype(np.float32)
    m = node_model("ScatterElements", {"x": x, "i": i, "u": u}, opset=18, axis=axis,
                   reduction=reduction)
    check_against_ort(m, {"x": x, "i": i, "u": u})


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_nd(reduction):
    x = RNG.standard_normal((4, 3, 2)).astype(np.float32)
    i = np.array([[[1, 0]], [[3, 2]]], np.int64)
    u = RNG.standard_normal((2, 1, 2)).astype(np.float32)
    m = node_model("ScatterND", {"x": x, "i": i, "u": u}, opset=18, reduction=reduction)
    check_against_ort(m, {"x": x, "i": i, "u": u})


def test_scatter_add_exports_as_scatter_nd():
    from onnx_cases import run_ort

    from ngrules.interop.onnx.exporter import to_onnx

    d = ng.placeholder({"A": 2, "T": 3, "B": 2}, np.float32, name="d")
    i = ng.placeholder({"T": 3}, np.int64, name="i")
    y = ng.make_node("ScatterAdd", (d, i), axis=ng.make_axis(4, "V"),
                     axes=ng.make_axes({"A": 2, "V": 4, "B": 2}))
    feeds = {"d": RNG.standard_normal((2, 3, 2)).astype(np.float32),
             "i": np.array([1, -1, 1], np.int64)}
    (got,) = run_ort(to_onnx([y], output_names=["y"]), feeds)
    np.testing.assert_allclose(got, ng.execute([y], feeds)[0], rtol=1e-6)
