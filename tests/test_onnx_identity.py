"""The round trip with no rule is the identity (issue 34, item 2): graph inputs and outputs keep
their names, their order and their `dim_param`s; an op that gives back an input as it is
(`Dropout`, a one-input `Max`, a default `Clip`, `Identity`) comes back as itself, and a shipped
pipeline still removes it."""

from collections import Counter

import numpy as np
import pytest

import ngrules as ng

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_cases import run_ort  # noqa: E402

from ngrules.interop.onnx.exporter import to_onnx  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402


def _dims(values):
    return [(v.name, [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim])
            for v in values]


def test_inputs_and_outputs_keep_their_order_names_and_dim_params():
    """Inputs (b, a) though a node reads a first; outputs (z, y) though y is computed later."""
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", "seq"])
              for n in ("b", "a")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", "seq"])
               for n in ("z", "y")]
    nodes = [helper.make_node("Mul", ["a", "a"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"]),
             helper.make_node("Relu", ["a"], ["z"])]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 17)])
    imported = import_model(model, symbolic=True)
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    assert _dims(out.graph.input) == _dims(model.graph.input)
    assert _dims(out.graph.output) == _dims(model.graph.output)
    feeds = {n: np.random.default_rng(i).standard_normal((3, 5)).astype(np.float32)
             for i, n in enumerate("ab")}
    want = run_ort(model, feeds)
    got = run_ort(out, feeds)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def _passing_model():
    """Relu(Dropout(Max(Clip(x)))), each of the three giving back its input."""
    nodes = [helper.make_node("Clip", ["x"], ["c"]), helper.make_node("Max", ["c"], ["m"]),
             helper.make_node("Dropout", ["m"], ["d"]), helper.make_node("Identity", ["d"], ["i"]),
             helper.make_node("Relu", ["i"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 3])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_ops_that_give_back_their_input_come_back_as_themselves():
    model = _passing_model()
    imported = import_model(model)
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    assert [n.op_type for n in out.graph.node] == [n.op_type for n in model.graph.node]
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    got = run_ort(out, {"x": x})[0]
    np.testing.assert_allclose(got, np.maximum(x, 0))


@pytest.mark.parametrize("pipeline", ["cpu", "inference"])
def test_a_shipped_pipeline_still_removes_them(pipeline):
    from ngrules.lang.library import load_library

    imported = import_model(_passing_model())
    outputs = ng.rewrite(imported.outputs, load_library(), pipeline=pipeline).outputs
    out = to_onnx(outputs, output_names=imported.output_names)
    assert Counter(n.op_type for n in out.graph.node) == Counter({"Relu": 1})


def test_the_input_order_is_the_last_imports_though_placeholders_are_shared():
    """Two models of the same inputs in two orders: each export follows its own import (the
    placeholders of equal inputs are one node, made by whichever import came first)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    for inputs in ([x, w], [w, x], [x, w]):
        graph = helper.make_graph([helper.make_node("Sub", ["x", "w"], ["y"])], "g", inputs, [y])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        imported = import_model(model)
        out = to_onnx(imported.outputs, output_names=imported.output_names)
        assert [i.name for i in out.graph.input] == [i.name for i in inputs]


def test_unsqueeze_and_squeeze_come_back_as_themselves():
    """The exporter lays out views as Reshapes; one that only inserts (removes) dimensions of
    length 1 is written as the Unsqueeze (Squeeze) it is (`exporting.passes.unit_views`)."""
    axes = [onnx.numpy_helper.from_array(np.int64(v), n)
            for n, v in (("ua", [0, 2]), ("sa", [0]))]
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Unsqueeze", ["r", "ua"], ["u"]),
             helper.make_node("Squeeze", ["u", "sa"], ["s"]), helper.make_node("Neg", ["s"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 3])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [2, 1, 3])], axes)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    imported = import_model(model)
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    ops = Counter(n.op_type for n in out.graph.node)
    assert ops == Counter(n.op_type for n in model.graph.node), ops
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    got = run_ort(out, {"x": x})[0]
    np.testing.assert_allclose(got, -np.maximum(x, 0)[:, None, :])


def _one_node_model(node, inputs, output, opset=17):
    graph = helper.make_graph([node], "g", inputs, [output])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_a_graph_output_folded_to_a_constant_comes_back_as_the_node_that_made_it():
    """Shape(x) is known at import (a constant); written back as Shape of the input x, run by
    onnxruntime to the same value, not an Identity of an initializer."""
    model = _one_node_model(
        helper.make_node("Shape", ["x"], ["y"], start=1),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        helper.make_tensor_value_info("y", TensorProto.INT64, [2]))
    imported = import_model(model)
    assert imported.outputs[0].op == "Constant"
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    assert [(n.op_type, list(n.input), list(n.output)) for n in out.graph.node] == \
        [("Shape", ["x"], ["y"])]
    feeds = {"x": np.zeros((2, 3, 4), np.float32)}
    got = run_ort(out, feeds)[0]
    np.testing.assert_array_equal(got, [3, 4])


def test_a_window_over_a_fixed_size_and_a_constant_come_back_as_themselves():
    """HannWindow(size) with size fixed at import, and a Constant output: the same op types."""
    hann = _one_node_model(
        helper.make_node("HannWindow", ["n"], ["y"]),
        [helper.make_tensor_value_info("n", TensorProto.INT32, [])],
        helper.make_tensor_value_info("y", TensorProto.FLOAT, [10]))
    imported = import_model(hann, constants={"n": np.array(10, np.int32)})
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    assert [n.op_type for n in out.graph.node] == ["HannWindow"]
    got = run_ort(out, {})[0]
    np.testing.assert_allclose(got, np.sin(np.pi * np.arange(10) / 10) ** 2, atol=1e-6)
    const = _one_node_model(
        helper.make_node("Constant", [], ["y"], value=helper.make_tensor(
            "v", TensorProto.FLOAT, [2], [1.5, -2.0])),
        [], helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]))
    imported = import_model(const)
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    assert [n.op_type for n in out.graph.node] == ["Constant"]
    np.testing.assert_array_equal(run_ort(out, {})[0], [1.5, -2.0])


def test_a_models_reshape_adding_a_unit_dimension_stays_a_reshape():
    """Reshape (2, 3, 4) -> (2, 0, 4, 1) only inserts a 1: read as a view, it comes back as the
    model's Reshape, not the Unsqueeze the last pass writes for the exporter's own Reshapes."""
    shape = numpy_helper.from_array(np.array([2, 0, 4, 1], np.int64), "shape")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 1])], [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    imported = import_model(model)
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    assert [(n.op_type, n.doc_string) for n in out.graph.node] == [("Reshape", "")]
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = run_ort(out, {"x": x})[0]
    np.testing.assert_array_equal(got, x.reshape(2, 3, 4, 1))


def test_a_folded_output_read_at_an_older_opset_is_written_back_in_that_opsets_form():
    """Opset 9's Unsqueeze takes its axes as an attribute: the node is written as read."""
    model = _one_node_model(
        helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0]),
        [helper.make_tensor_value_info("x", TensorProto.INT64, [3])],
        helper.make_tensor_value_info("y", TensorProto.INT64, [1, 3]), opset=9)
    imported = import_model(model, constants={"x": np.array([4, 5, 6], np.int64)})
    out = to_onnx(imported.outputs, output_names=imported.output_names, opset=9)
    (node,) = out.graph.node
    assert (node.op_type, [a.name for a in node.attribute], node.doc_string) == \
        ("Unsqueeze", ["axes"], "")
    got = run_ort(out, {})[0]
    np.testing.assert_array_equal(got, [[4, 5, 6]])


def test_a_graph_input_nothing_reads_is_written_back_in_its_place():
    """Inputs (u, a, v): only a is read. All three come back, in that order, with their types
    and dim_params (symbolic import) or the lengths given; the output still runs."""
    inputs = [helper.make_tensor_value_info("u", TensorProto.FLOAT, ["batch", 3]),
              helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 3]),
              helper.make_tensor_value_info("v", TensorProto.INT64, [4])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])]
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["a"], ["y"])], "g",
                                                inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 17)])
    imported = import_model(model, symbolic=True)
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    assert _dims(out.graph.input) == _dims(model.graph.input)
    assert [v.type.tensor_type.elem_type for v in out.graph.input] == \
        [TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.INT64]
    imported = import_model(model, lengths={"batch": 2})
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    assert _dims(out.graph.input) == [("u", [2, 3]), ("a", [2, 3]), ("v", [4])]
    feeds = {"u": np.ones((2, 3), np.float32), "a": np.full((2, 3), -1.0, np.float32),
             "v": np.arange(4)}
    got = run_ort(out, feeds)[0]
    np.testing.assert_array_equal(got, np.zeros((2, 3), np.float32))


def test_an_output_dimension_named_by_the_model_alone_keeps_its_name():
    """An exporter names an output dimension it could not infer (`Reshapey_dim_2`, always
    768 in GPT-2): written back under that name, not as the length; an input's symbol stays."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "width"])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    imported = import_model(model, symbolic=True)
    written = to_onnx(imported.outputs, output_names=imported.output_names, opset=18)
    (out,) = written.graph.output
    assert [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim] == \
        ["batch", "width"]
