"""Faults the ONNX fuzzer (`tests/onnx_fuzz.py`) found, each as a small model of its own: a
value a tensor cannot hold, attribute lists of the wrong length, pads that crop a dimension
away or would materialise gigabytes. Each ends as one located `OnnxError` line or imports and
computes what onnxruntime computes (issues 20 and 25)."""

import time

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from onnx_cases import check_against_ort, node_model  # noqa: E402
from test_onnx_import import model, value  # noqa: E402

import ngrules as ng  # noqa: E402
from ngrules.interop.onnx import OnnxError  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402

X = np.arange(6, dtype=np.float32).reshape(2, 3)


def ints(values):
    return np.asarray(values, dtype=np.int64)


def _error(m) -> str:
    start = time.perf_counter()
    with pytest.raises(OnnxError) as info:
        import_model(m)
    assert time.perf_counter() - start < 5
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def _old_pad(value_attr: float, elem=TensorProto.UINT8, pads=(0, 1, 0, 1)):
    """Pad as opset 6 writes it: pads and the fill value as attributes."""
    node = helper.make_node("Pad", ["x"], ["y"], name="pad", pads=list(pads), value=value_attr)
    out = [2 + pads[0] + pads[2], 3 + pads[1] + pads[3]]
    return model([node], [value("x", [2, 3], elem)], [value("y", out, elem)], opset=6)


@pytest.mark.parametrize("fill", [float("inf"), float("-inf"), float("nan")])
def test_a_non_finite_pad_value_for_an_integer_tensor_is_located(fill):
    message = _error(_old_pad(fill))
    assert message.startswith("Pad node 'pad': the pad value") and "uint8" in message


def test_a_pad_value_out_of_the_integer_range_is_located():
    m = node_model("Pad", {"x": X.astype(np.int32)}, {"p": ints([0, 1, 0, 1]),
                                                       "v": np.array(2**40, np.int64)})
    assert "the pad value 1099511627776 does not fit the input's type int32" in _error(m)


def test_a_pad_value_of_several_elements_is_located():
    m = node_model("Pad", {"x": X}, {"p": ints([0, 1, 0, 1]), "v": np.ones(2, np.float32)})
    assert "the pad value is not one number" in _error(m)


def test_a_finite_pad_value_still_pads_an_integer_tensor():
    x = X.astype(np.int32)
    check_against_ort(node_model("Pad", {"x": x}, {"p": ints([1, 0, 0, 2]),
                                                   "v": np.array(7, np.int32)}), {"x": x})


def test_pads_of_the_wrong_length_are_located():
    m = _old_pad(2.0, TensorProto.FLOAT, pads=(0, 0, 3, 1, 0, 4, 2))
    m.graph.output[0].type.tensor_type.shape.Clear()
    assert "pads has 7 values, not two for each of the 2 padded dimensions" in _error(m)


@pytest.mark.parametrize("mode", ["constant", "edge", "wrap", "reflect"])
@pytest.mark.parametrize("pads", [[0, -10, 0, 0], [0, -2, 0, -2]])
def test_pads_cropping_a_whole_dimension_are_located(mode, pads):
    m = node_model("Pad", {"x": X}, {"p": ints(pads)}, opset=19, mode=mode)
    assert f"pads {pads[1]} and {pads[3]} crop all of dimension 1 (length 3)" in _error(m)


@pytest.mark.parametrize("mode", ["edge", "wrap"])
def test_edge_padding_of_a_trillion_is_refused_by_the_constant_budget(mode):
    m = node_model("Pad", {"x": X}, {"p": ints([0, 2**40, 0, 0])}, opset=19, mode=mode)
    assert "more than the limit" in _error(m)


@pytest.mark.parametrize("axes", [[0, 2], [1, -1]])
def test_pad_axes_that_are_not_distinct_dimensions_are_located(axes):
    """Even when a Constant node computes them (shape inference reads it)."""
    m = node_model("Pad", {"x": X}, {"p": ints([1, 1, 1, 1]), "v": np.array(0, np.float32)},
                   opset=19)
    m.graph.node[0].input.append("a")
    axes_tensor = onnx.numpy_helper.from_array(ints(axes), "axes")
    m.graph.node.insert(0, helper.make_node("Constant", [], ["a"], value=axes_tensor))
    assert _error(m).startswith("Pad node 'n' does not fit its inputs")


@pytest.mark.parametrize("exponent", [np.array([2.0]), np.array([[3.0]]),
                                      np.array([[3.0, 2.0, 0.5]])])
def test_pow_with_an_exponent_of_one_element_in_a_tensor_matches_onnxruntime(exponent):
    x = X + 1
    check_against_ort(node_model("Pow", {"x": x}, {"e": exponent.astype(np.float32)}), {"x": x})


def test_an_infinite_clip_bound_for_an_integer_tensor_is_located():
    node = helper.make_node("Clip", ["x"], ["y"], name="clip", min=float("inf"))
    m = model([node], [value("x", [2, 3], TensorProto.INT32)],
              [value("y", [2, 3], TensorProto.INT32)], opset=6)
    assert "Clip node 'clip': the min inf does not fit the input's type int32" in _error(m)


@pytest.mark.parametrize("batch_dims", [-5, -(2**31)])
def test_a_gather_nd_batch_dims_onnx_would_crash_on_is_refused_first(batch_dims):
    """onnx's shape inference reads data dimension batch_dims + 1 without a bound check: a
    segmentation fault of the whole process below -4."""
    x, i = np.zeros((2, 3), np.float32), np.zeros((2, 1), np.int64)
    m = node_model("GatherND", {"x": x, "i": i}, batch_dims=0)
    m.graph.node[0].attribute[0].i = batch_dims
    assert f"GatherND node 'n': batch_dims is {batch_dims}, less than 0" in _error(m)


def test_the_same_attribute_inside_a_subgraph_is_refused():
    x, i = np.zeros((2, 3), np.float32), np.zeros((2, 1), np.int64)
    inner = node_model("GatherND", {"x": x, "i": i}, batch_dims=0).graph
    inner.node[0].attribute[0].i = -7
    del inner.input[:]
    branch = helper.make_node("If", ["c"], ["y0"], name="if", then_branch=inner,
                              else_branch=inner)
    m = model([branch], [value("c", [], TensorProto.BOOL), value("x", [2, 3]),
                         value("i", [2, 1], TensorProto.INT64)], [value("y0", [2])])
    assert "GatherND node 'n': batch_dims is -7, less than 0" in _error(m)


_SEQ = np.zeros((5, 2, 3), np.float32)
_W, _R = np.zeros((1, 16, 3), np.float32), np.zeros((1, 16, 4), np.float32)


@pytest.mark.parametrize("inits, attrs, expected", [
    ({"w": _W, "r": np.float32(0)}, {}, "input 2 has shape (), not (1, 16, 4)"),
    ({"w": _W, "r": _R[:, :5]}, {}, "input 2 has shape (1, 5, 4), not (1, 16, 4)"),
    ({"w": _W, "r": _R, "b": np.zeros((1, 3), np.float32)}, {}, "input 3 has shape (1, 3)"),
    ({"w": _W, "r": _R}, {"hidden_size": None}, "hidden_size None and an input of shape"),
    ({"w": _W, "r": _R}, {"hidden_size": 0}, "hidden_size 0 and an input of shape"),
    ({"w": _W, "r": _R}, {"activations": ["Sigmoid"]}, "1 activations for 1 direction(s) of 3"),
    ({"w": _W, "r": _R}, {"direction": "sideways"}, "direction 'sideways' is not forward"),
])
def test_recurrent_weights_and_attributes_that_do_not_fit_are_located(inits, attrs, expected):
    attrs = {"hidden_size": 4, **attrs}
    m = node_model("LSTM", {"x": _SEQ}, inits, **{k: v for k, v in attrs.items() if v is not None})
    assert _error(m).startswith(f"LSTM node 'n': {expected}")


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_a_pooling_output_longer_than_its_padded_input_is_located(op):
    """An output declared bool (so inference's contradiction is not strict) and 2**40 long:
    the average's counts were an 8 TiB array."""
    node = helper.make_node(op, ["x"], ["y"], name="pool", kernel_shape=[2, 2], strides=[2, 2],
                            pads=[0, 0, 0, 0])
    m = model([node], [value("x", [2, 3, 6, 6])],
              [value("y", [2, 3, 2**40, 3], TensorProto.BOOL)], opset=6)
    assert "pool': an output of spatial shape (1099511627776, 3) does not fit" in _error(m)


def test_concat_of_opset_1_without_axis_joins_along_its_default_axis():
    a, b = np.ones((2, 3), np.float32), np.zeros((2, 2), np.float32)
    m = model([helper.make_node("Concat", ["a", "b"], ["y"])], [value("a", [2, 3]),
                                                                value("b", [2, 2])],
              [value("y", [2, 5])], opset=1)
    imported = import_model(m)
    got = ng.execute(imported.outputs, {"a": a, "b": b})[0]
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis=1))


@pytest.mark.parametrize("heads", [0, 5])
def test_attention_heads_that_do_not_split_the_hidden_size_are_located(heads):
    q = np.zeros((1, 3, 8), np.float32)
    m = node_model("Attention", {"q": q, "k": q, "v": q}, opset=23, q_num_heads=heads,
                   kv_num_heads=heads)
    assert "cannot be split into" in _error(m) or "does not fit its inputs" in _error(m)


def test_a_sequence_too_long_to_unroll_is_refused_quickly():
    """A mutant's LSTM of 2**40 steps was a MemoryError (and 10**6 would take hours)."""
    m = node_model("LSTM", {"x": _SEQ}, {"w": _W, "r": _R}, hidden_size=4)
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2**40
    del m.graph.output[:]
    m.graph.output.append(value("y0", [2**40, 1, 2, 4]))
    assert "a sequence of 1099511627776 steps in 1 direction(s) is more than" in _error(m)


@pytest.mark.parametrize(("output", "batch"), [("yQy", 2), ("y", "bQb")], ids=["node", "graph"])
def test_a_name_that_is_not_utf8_is_located(output, batch, tmp_path):
    """Protobuf hands back a string field that is not UTF-8 as bytes (a flipped bit in an LSTM
    output's name was a TypeError in axis naming): a node's output, a graph's dim_param."""
    node = helper.make_node("Relu", ["x"], [output], name="relu")
    inp = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3])
    out = helper.make_tensor_value_info(output, TensorProto.FLOAT, [batch, 3])
    data = helper.make_model(helper.make_graph([node], "g", [inp], [out])).SerializeToString()
    path = tmp_path / "m.onnx"
    path.write_bytes(data.replace(b"Q", b"\xd3"))
    with pytest.raises(OnnxError, match="not UTF-8 text"):
        ng.from_onnx(str(path))
