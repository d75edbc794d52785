"""ONNX models as an attacker or a careless exporter writes them (issues 20 and 25): odd files,
tensors whose data lies about their dims, duplicate names, constants that would take gigabytes
to fold. Each is one `OnnxError` naming the file or the node, quickly and with little memory;
shape computations an exporter spells out in primitives are folded, so they import."""

import os
import resource
import time

import numpy as np
import pytest

import ngrules as ng

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from test_onnx_import import model, value  # noqa: E402

from ngrules.interop.onnx import OnnxError, UnsupportedOp  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402
from ngrules.interop.onnx.importing.loading import Limits  # noqa: E402

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def ints(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def relu():
    return model([helper.make_node("Relu", ["x"], ["y"], name="r")], [value("x", [2, 3])],
                 [value("y", [2, 3])])


def _error(m, **kw) -> str:
    start = time.perf_counter()
    with pytest.raises(OnnxError) as info:
        import_model(m, **kw)
    assert time.perf_counter() - start < 5
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


# -- files --------------------------------------------------------------------------------------
def test_a_fifo_a_device_and_a_folder_are_refused_before_reading(tmp_path):
    fifo = tmp_path / "m.onnx"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero", tmp_path):
        assert "not a regular file" in _error(str(path))


def test_an_empty_file_is_not_a_model(tmp_path):
    (tmp_path / "e.onnx").write_bytes(b"")
    assert "0 bytes" in _error(tmp_path / "e.onnx")


def test_a_model_over_the_size_limit_is_refused_unread(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(relu().SerializeToString())
    assert "more than the limit" in _error(path, limits=Limits(model_bytes=10))
    assert import_model(path).output_names == ["y"]


def test_external_data_outside_the_models_folder_is_refused(tmp_path):
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    w.external_data.add(key="location", value="../../etc/passwd")
    m = model([helper.make_node("Add", ["x", "w"], ["y"], name="a")], [value("x", [2, 3])],
              [value("y", [2, 3])], [w])
    (tmp_path / "m.onnx").write_bytes(m.SerializeToString())
    assert "outside the model's folder" in _error(tmp_path / "m.onnx")


def test_external_data_inside_the_folder_is_read(tmp_path):
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    (tmp_path / "w.bin").write_bytes(w.raw_data)
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="w.bin")
    m = model([helper.make_node("Add", ["x", "w"], ["y"], name="a")], [value("x", [2, 3])],
              [value("y", [2, 3])], [w])
    (tmp_path / "m.onnx").write_bytes(m.SerializeToString())
    (y,) = ng.from_onnx(tmp_path / "m.onnx")
    got = ng.execute([y], {"x": np.zeros((2, 3), np.float32)})[0]
    np.testing.assert_array_equal(got, np.arange(6).reshape(2, 3))


# -- structure ----------------------------------------------------------------------------------
def test_duplicate_producers_are_a_located_error():
    m = model([helper.make_node("Relu", ["x"], ["y"], name="a"),
               helper.make_node("Neg", ["x"], ["y"], name="b")],
              [value("x", [2])], [value("y", [2])])
    assert "'y'" in _error(m) and "invalid ONNX model" in _error(m)


def test_duplicate_initializers_are_a_located_error():
    w1 = numpy_helper.from_array(np.ones(2, np.float32), "w")
    w2 = numpy_helper.from_array(np.zeros(2, np.float32), "w")
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [value("x", [2])],
              [value("y", [2])], [w1, w2])
    assert "w initializer name is not unique" in _error(m)


@pytest.mark.parametrize("where", ["initializer", "constant"])
def test_tensor_data_that_does_not_fill_its_dims_is_a_located_error(where):
    t = numpy_helper.from_array(np.ones(4, np.float32), "w")
    t.dims[:] = [2, 3]
    if where == "initializer":
        m = model([helper.make_node("Add", ["x", "w"], ["y"])], [value("x", [2, 3])],
                  [value("y", [2, 3])], [t])
    else:
        m = model([helper.make_node("Constant", [], ["w"], name="c", value=t),
                   helper.make_node("Add", ["x", "w"], ["y"])],
                  [value("x", [2, 3])], [value("y", [2, 3])])
    message = _error(m)
    assert "name: w)" in message and "too small for the declared shape" in message, message


def test_typed_data_of_the_wrong_length_is_a_located_error():
    """float_data (not raw bytes), which the checker does not measure."""
    t = TensorProto(name="w", data_type=F32, dims=[2, 3], float_data=[1.0, 2.0])
    m = model([helper.make_node("Constant", [], ["w"], name="c", value=t),
               helper.make_node("Add", ["x", "w"], ["y"])],
              [value("x", [2, 3])], [value("y", [2, 3])])
    message = _error(m)
    assert "name: w)" in message and "float_data size (2) is too small" in message, message


# -- the size budget ----------------------------------------------------------------------------
def _peak_rss_grows_less_than(megabytes, fn):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn()
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < megabytes * 1024, grown


@pytest.mark.parametrize("op, inputs, inits", [
    ("ConstantOfShape", ["s"], [ints("s", [15000, 15000])]),
    ("Range", ["a", "b", "c"], [ints("a", 0), ints("b", 10**8), ints("c", 1)]),
    ("Tile", ["t", "r"], [ints("t", [1, 2]), ints("r", [10**5, 10**4])]),
    ("Expand", ["t", "s"], [ints("t", [[1], [2]]), ints("s", [2, 10**9])]),
])
def test_a_constant_over_the_budget_is_refused_before_it_is_computed(op, inputs, inits):
    m = model([helper.make_node(op, inputs, ["big"], name="huge"),
               helper.make_node("Cast", ["big"], ["y"], to=F32)],
              [], [value("y", ["d0", "d1"][: 1 + (op != "Range")])], inits)
    message = []
    _peak_rss_grows_less_than(100, lambda: message.append(_error(m)))
    assert f"{op} node 'huge'" in message[0] and "more than the limit of" in message[0]


def test_the_budget_is_configurable():
    m = model([helper.make_node("ConstantOfShape", ["s"], ["big"], name="c"),
               helper.make_node("Cast", ["big"], ["y"], to=F32)],
              [], [value("y", [100])], [ints("s", [100])])
    assert "400 bytes" in _error(m, limits=Limits(constant_bytes=100))  # 100 float32
    (y,) = ng.from_onnx(m)
    np.testing.assert_array_equal(ng.execute([y], {})[0], np.zeros(100))


def test_a_loop_is_never_evaluated_at_import():
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"])], "body",
                             [value("i", [], I64), value("c", [], TensorProto.BOOL)],
                             [value("c_out", [], TensorProto.BOOL)])
    m = model([helper.make_node("Loop", ["n", "t"], [], name="spin", body=body)],
              [], [], [ints("n", 10**15), numpy_helper.from_array(np.array(True), "t")])
    m.graph.output.append(value("n_out", [], I64))
    m.graph.node.append(helper.make_node("Identity", ["n"], ["n_out"]))
    message = _error(m)
    assert "Loop" in message or "int64" in message


# -- shapes computed in primitives --------------------------------------------------------------
def test_a_reshape_target_computed_by_division_is_folded_and_imports():
    """DepthToSpace as exporters expand it: Shape, Slice, Div, Concat, Reshape (shape
    inference alone leaves the Reshape's output unknown)."""
    k = lambda name, v: helper.make_node("Constant", [], [name], value=ints(name, v))  # noqa: E731
    nodes = [
        k("two", [2]), k("zero", [0]), k("one", [1]), k("four", [4]),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "one", "two"], ["c"]),
        helper.make_node("Div", ["c", "two"], ["half"]),
        helper.make_node("Concat", ["half", "two", "four"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="rs"),
    ]
    m = model(nodes, [value("x", [1, 4, 4])], [value("y", ["a", "b", "c"])])
    (y,) = ng.from_onnx(m)
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4)
    np.testing.assert_array_equal(ng.execute([y], {"x": x})[0], x.reshape(2, 2, 4))


def test_a_value_whose_shape_stays_unknown_is_refused_not_made_a_scalar():
    m = model([helper.make_node("Reshape", ["x", "t"], ["y"], name="rs")],
              [value("x", [2, 3]), value("t", [2], I64)], [value("y", ["a", "b"])])
    with pytest.raises(UnsupportedOp, match="not static|shape inference leaves unknown"):
        import_model(m)


def test_a_flattening_that_names_its_own_axis_imports_without_recursion():
    """x [1, 6] reshaped to [6] and squeezed to [6], both added: the flattened class is one of
    its own parts (the ViT of the legacy exporter recursed without end here)."""
    nodes = [helper.make_node("Reshape", ["x", "t"], ["y"]),
             helper.make_node("Squeeze", ["x", "ax"], ["s"]),
             helper.make_node("Add", ["s", "y"], ["z"])]
    m = model(nodes, [value("x", [1, 6])], [value("z", [6])], [ints("t", [6]), ints("ax", [0])])
    (z,) = ng.from_onnx(m)
    x = np.arange(6, dtype=np.float32).reshape(1, 6)
    np.testing.assert_array_equal(ng.execute([z], {"x": x})[0], 2 * x[0])



def _old_model(nodes, inputs, outputs, inits=()):
    """IR 3, opset 9, as the networks the onnx wheel ships as `light_*` test data."""
    graph = helper.make_graph(nodes, "t", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    m.ir_version = 3
    return m


def test_weights_made_by_constant_of_shape_in_an_ir3_model_import():
    """Before IR 4 an initializer counts for shape inference only when it is also an input:
    folded weights must be declared so, or the Conv after them has no shape."""
    fill = numpy_helper.from_array(np.array([0.5], np.float32), "")
    nodes = [helper.make_node("ConstantOfShape", ["ws"], ["w"], value=fill),
             helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]
    m = _old_model(nodes, [value("x", [1, 2, 3, 3]), value("ws", [4], I64)],
                   [value("y", [1, 4, 3, 3])], [ints("ws", [4, 2, 1, 1])])
    (y,) = ng.from_onnx(m)
    x = np.ones((1, 2, 3, 3), np.float32)
    np.testing.assert_allclose(ng.execute([y], {"x": x})[0], np.ones((1, 4, 3, 3)))


def test_an_output_inference_leaves_open_takes_the_converters_axes():
    nodes = [helper.make_node("Dropout", ["x"], ["y", "mask"], name="drop", ratio=0.5),
             helper.make_node("Relu", ["y"], ["z"])]
    m = _old_model(nodes, [value("x", [2, 3])], [value("z", [2, 3])])
    (z,) = ng.from_onnx(m)
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(ng.execute([z], {"x": x})[0], np.maximum(x, 0))


# -- models that contradict themselves ----------------------------------------------------------
def _gemm(k_weights, opset=17, x_shape=("N", 4)):
    w = numpy_helper.from_array(np.ones((3, k_weights), np.float32), "w")
    b = numpy_helper.from_array(np.zeros(3, np.float32), "b")
    return model([helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1)],
                 [value("x", list(x_shape))], [value("y", ["N", 3])], [w, b], opset=opset)


def test_a_contradiction_shape_inference_sees_once_lengths_are_given_is_located():
    message = _error(_gemm(5, opset=17), lengths={"N": 2})
    assert "Gemm node 'fc'" in message and "shape inference" in message, message


def test_a_contradiction_shape_inference_misses_is_located_by_the_converter():
    """Gemm of opset 6 is inferred without checking the contracted dimension."""
    message = _error(_gemm(5, opset=6, x_shape=(2, 4)))
    assert message.startswith("Gemm node 'fc': an input of shape"), message
    (y,) = ng.from_onnx(_gemm(4, opset=6, x_shape=(2, 4)))
    np.testing.assert_array_equal(ng.execute([y], {"x": np.ones((2, 4), np.float32)})[0],
                                  np.full((2, 3), 4.0))


@pytest.mark.parametrize("attrs, out, expected", [
    ({"strides": [2**63 - 1, 1]}, [1, 1, 1, 3], "strides"),
    ({"pads": [0, 0, 0]}, [1, 1, 3, 3], "one value per spatial dimension"),
    ({"kernel_shape": [2, 15000]}, [1, 1, 3, 3], None),
])
def test_window_geometry_out_of_range_is_located(attrs, out, expected):
    attrs = {"kernel_shape": [2, 2], **attrs}
    m = model([helper.make_node("AveragePool", ["x"], ["y"], name="pool", **attrs)],
              [value("x", [1, 1, 4, 4])], [value("y", out)])
    message = _error(m)
    assert "AveragePool node 'pool'" in message, message
    assert expected is None or expected in message, message


def test_a_string_attribute_that_is_not_text_is_located():
    m = model([helper.make_node("Pad", ["x", "p"], ["y"], name="pad", mode=b"\xff")],
              [value("x", [2])], [value("y", [4])], [ints("p", [1, 1])])
    assert "Pad node 'pad': attribute mode is not UTF-8 text" in _error(m)


@pytest.mark.parametrize("node", [
    helper.make_node("Conv", ["x", "b", "b"], ["y"], name="conv"),  # 1-D weights
    helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 5, 1, 2]),
    helper.make_node("MaxPool", ["b"], ["y"], name="pool", kernel_shape=[1]),
])
def test_naming_axes_never_assumes_the_ranks_an_op_requires(node):
    """Naming runs before any converter checks its node: a fuzzed Conv reading its 1-D bias
    as weights made it index past the weights' dimensions."""
    from ngrules.interop.onnx.importing.axes import Shapes, name_axes

    b = numpy_helper.from_array(np.ones(2, np.float32), "b")
    m = model([node], [value("x", [1, 1, 3, 3])], [value("y", [1, 2, 3, 3])], [b])
    naming = name_axes(Shapes(m, {}), {}, {})
    assert [a.length for a in naming.axes("x")] == [1, 1, 3, 3]


def test_pooling_a_bool_tensor_is_refused_by_name():
    m = model([helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2],
                                pads=[0, 0, 1, 0])],
              [value("x", [1, 1, 3, 3], elem=TensorProto.BOOL)],
              [value("y", [1, 1, 3, 2], elem=TensorProto.BOOL)])
    with pytest.raises(UnsupportedOp, match="MaxPool node 'pool': a bool input"):
        import_model(m)


def test_a_split_claiming_two_billion_outputs_is_refused_before_onnx_allocates_them():
    m = model([helper.make_node("Split", ["x"], ["a", "b"], name="split", axis=0,
                                num_outputs=2**31 - 1)],
              [value("x", [4])], [value("a", [2]), value("b", [2])], opset=18)
    message = []
    _peak_rss_grows_less_than(100, lambda: message.append(_error(m)))
    assert "Split node 'split': num_outputs is 2147483647 for 2 outputs" in message[0]


def test_a_constant_of_shape_of_too_many_dimensions_is_located():
    m = model([helper.make_node("ConstantOfShape", ["s"], ["c"], name="fill"),
               helper.make_node("Cast", ["c"], ["y"], to=F32)],
              [], [value("y", ["d"] * 96)], [ints("s", [1] * 96)])
    assert "ConstantOfShape node 'fill'" in _error(m)
