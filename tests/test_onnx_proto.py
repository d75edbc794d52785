"""ngrules' ONNX path without the `onnx` package's Python layer (issue 34, item 6): `proto`
loads onnx's protobuf classes and C++ checker alone, `ndarrays` converts tensors. What they
build is what `onnx.helper` and `onnx.numpy_helper` build (compared byte for byte); `ngrules
apply` on a model (a shape computation folded at import included) never imports `onnx`,
`onnx.helper` or `ml_dtypes`; and an `import onnx` after ngrules has loaded them works in full,
on the same classes and error types."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from ngrules.interop.onnx import ndarrays, proto, weights  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

#: Every element type numpy has, with values that reach its corners.
PLAIN = {
    TensorProto.FLOAT: np.array([[1.5, -0.0], [np.inf, 3e38]], np.float32),
    TensorProto.UINT8: np.array([0, 255], np.uint8),
    TensorProto.INT8: np.array([-128, 127], np.int8),
    TensorProto.UINT16: np.array([0, 65535], np.uint16),
    TensorProto.INT16: np.array([-32768, 32767], np.int16),
    TensorProto.INT32: np.array([-2**31, 2**31 - 1], np.int32),
    TensorProto.INT64: np.array([[-2**63], [2**63 - 1]], np.int64),
    TensorProto.BOOL: np.array([True, False, True]),
    TensorProto.FLOAT16: np.array([1.0, -65504.0, np.nan], np.float16),
    TensorProto.DOUBLE: np.array([1e-300, -2.5], np.float64),
    TensorProto.UINT32: np.array([0, 2**32 - 1], np.uint32),
    TensorProto.UINT64: np.array([0, 2**64 - 1], np.uint64),
    TensorProto.COMPLEX64: np.array([1 + 2j, -3j], np.complex64),
    TensorProto.COMPLEX128: np.array([[1 - 1j]], np.complex128),
    TensorProto.STRING: np.array(["a", "\u00e9t\u00e9", ""], object),
}


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype == object:
        assert a.tolist() == b.tolist()
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("elem", sorted(PLAIN))
def test_tensors_are_onnxs_byte_for_byte_and_read_back_alike(elem):
    value = PLAIN[elem]
    ours = ndarrays.from_array(value, "t")
    assert ours.SerializeToString() == numpy_helper.from_array(value, "t").SerializeToString()
    typed = helper.make_tensor("t", elem, value.shape, value.flatten().tolist())  # not raw
    mine = ndarrays.make_tensor("t", elem, value.shape, value.flatten().tolist())
    assert mine.SerializeToString() == typed.SerializeToString()
    for tensor in (ours, typed):
        _same(ndarrays.to_array(tensor), numpy_helper.to_array(tensor))
    _same(ndarrays.to_array(typed), value)
    assert ndarrays.tensor_dtype_to_np_dtype(elem) == helper.tensor_dtype_to_np_dtype(elem)
    assert ndarrays.np_dtype_to_tensor_dtype(value.dtype) == elem


def test_a_raw_tensor_is_made_as_onnx_makes_it_and_a_wrong_size_refused():
    value = np.arange(6, dtype=np.int16).reshape(2, 3)
    ours = ndarrays.make_tensor("r", TensorProto.INT16, [2, 3], value, raw=True)
    assert ours == helper.make_tensor("r", TensorProto.INT16, [2, 3], value, raw=True)
    with pytest.raises(ValueError):
        ndarrays.make_tensor("r", TensorProto.INT16, [2, 4], value.tobytes(), raw=True)
    with pytest.raises(ValueError):
        ndarrays.make_tensor("r", TensorProto.FLOAT, [3], [1.0, 2.0])
    with pytest.raises(ValueError):  # onnx's words: no element type for it
        ndarrays.np_dtype_to_tensor_dtype(np.dtype("datetime64[s]"))


def test_an_exotic_type_goes_to_onnx_which_reads_it():
    value = np.array([1.0, -2.5, 0.0078125], np.float32)
    tensor = helper.make_tensor("b", TensorProto.BFLOAT16, [3], value)
    got = ndarrays.to_array(tensor)
    assert str(got.dtype) == "bfloat16"
    np.testing.assert_array_equal(got.astype(np.float32), value)
    assert ndarrays.from_array(got, "b") == numpy_helper.from_array(got, "b")
    assert ndarrays.np_dtype_to_tensor_dtype(got.dtype) == TensorProto.BFLOAT16


ATTRIBUTES = [3, True, np.int64(-4), 2.5, np.float32(0.5), "same_upper", b"\xff\x00",
              [1, 2, 3], (0.5, 1), [1.0, 2.0], ["a", b"b"], numpy_helper.from_array(PLAIN[1]),
              [numpy_helper.from_array(PLAIN[7])],
              helper.make_graph([], "g", [], [])]


@pytest.mark.parametrize("value", ATTRIBUTES, ids=lambda v: type(v).__name__)
def test_attributes_are_onnxs_and_read_back_alike(value):
    ours = proto.make_attribute("a", value)
    theirs = helper.make_attribute("a", value)
    assert ours.SerializeToString() == theirs.SerializeToString()
    assert proto.get_attribute_value(ours) == helper.get_attribute_value(theirs)


def test_attributes_onnx_refuses_are_refused():
    for bad in ([], [1, "a"], object()):
        with pytest.raises((ValueError, TypeError)):
            proto.make_attribute("a", bad)
    empty = proto.make_attribute("a", [], attr_type=onnx.AttributeProto.INTS)
    assert empty == helper.make_attribute("a", [], attr_type=onnx.AttributeProto.INTS)


def test_nodes_graphs_models_and_functions_are_onnxs():
    def build(h):
        node = h.make_node("Conv", ["x", "w"], ["y"], name="c", domain="", pads=[1, 1, 1, 1],
                           group=None, auto_pad="NOTSET")
        infos = [h.make_tensor_value_info("x", 1, ["N", 3, None, 4]),
                 h.make_tensor_value_info("w", 1, []), h.make_tensor_value_info("y", 1, None)]
        graph = h.make_graph([node], "g", infos[:2], infos[2:], doc_string="d")
        f = h.make_function("dom", "f", ["a"], ["b"], [h.make_node("Relu", ["a"], ["b"])],
                            [h.make_opsetid("", 17)])
        return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], functions=[f],
                            producer_name="p")

    assert build(proto).SerializeToString() == build(helper).SerializeToString()
    default = proto.make_model(proto.make_graph([], "g", [], []))
    assert default.opset_import[0].version == onnx.defs.onnx_opset_version()
    assert default.ir_version == onnx.IR_VERSION


def test_the_classes_and_errors_are_onnxs_own():
    assert proto.ModelProto is onnx.ModelProto and proto.TensorProto is TensorProto
    assert proto.ValidationError is onnx.checker.ValidationError
    assert proto.InferenceError is onnx.shape_inference.InferenceError
    with pytest.raises(onnx.checker.ValidationError):
        proto.check_model(proto.ModelProto())
    bad = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", 1, [2])],
        [helper.make_tensor_value_info("y", 7, [2])]))  # the checker misses the type
    proto.check_model(bad)
    with pytest.raises(onnx.shape_inference.InferenceError):
        proto.infer_shapes(bad, check_type=True, strict_mode=True)
    inferred = proto.infer_shapes(bad.SerializeToString())
    assert inferred == onnx.shape_inference.infer_shapes(bad)
    assert proto.get_schema("Conv", 9, "").since_version == 1


def _tiny_model(path: Path) -> None:
    """x[1, 16, 8, 8] -> Conv with a weight kept apart (weights.split) -> Relu -> Reshape to
    [1, -1] by a shape computation the importer folds (Shape, Gather, Unsqueeze, Concat)."""
    w = np.random.default_rng(0).standard_normal((16, 16, 5, 5)).astype(np.float32)
    assert w.size > weights.STEERING_SIZE
    consts = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0), "zero"),
              numpy_helper.from_array(np.array([0]), "axes"),
              numpy_helper.from_array(np.array([-1]), "rest")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], pads=[2, 2, 2, 2]),
             helper.make_node("Relu", ["h"], ["r"]), helper.make_node("Shape", ["r"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"]),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "rest"], ["shape"], axis=0),
             helper.make_node("Reshape", ["r", "shape"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])
    graph = helper.make_graph(nodes, "conv", [x], [y], consts)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


APPLY = """
import json, sys
from ngrules.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(json.dumps([code, sorted(sys.modules)]))
"""


def test_apply_on_an_onnx_model_never_imports_the_onnx_package(tmp_path):
    _tiny_model(tmp_path / "m.onnx")
    proc = subprocess.run(
        [sys.executable, "-c", APPLY, "apply", "m.onnx", "--pipeline", "inference", "-o",
         "out.onnx", "-q"],
        cwd=tmp_path, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    code, modules = json.loads(proc.stdout.strip().splitlines()[-1])
    assert code in (0, None), proc.stderr
    loaded = {"onnx", "onnx.helper", "onnx.numpy_helper", "ml_dtypes"} & set(modules)
    assert not loaded, f"imported: {sorted(loaded)}"
    assert "ngrules.interop.onnx.proto" in modules  # onnx's protobuf module, loaded alone
    written = onnx.load(str(tmp_path / "out.onnx"))
    onnx.checker.check_model(written, full_check=True)
    assert {"Conv", "Relu", "Reshape"} <= {n.op_type for n in written.graph.node}
    x = np.random.default_rng(1).standard_normal((1, 16, 8, 8)).astype(np.float32)
    (want,) = ReferenceEvaluator(onnx.load(str(tmp_path / "m.onnx"))).run(None, {"x": x})
    (got,) = ReferenceEvaluator(written).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


AFTER = """
import numpy as np
import ngrules as ng
from ngrules.interop.onnx import proto
x = ng.placeholder([ng.make_axis(2, "B"), ng.make_axis(3, "F")])
model = ng.to_onnx([ng.maximum(x, 0.0) * 2.0 + 1.0])
import sys
assert "onnx" not in sys.modules and "ml_dtypes" not in sys.modules, sorted(sys.modules)
import onnx
from onnx import checker, helper, numpy_helper, shape_inference, version_converter
import onnx.reference
assert onnx.ModelProto is proto.ModelProto and isinstance(model, onnx.ModelProto)
assert onnx.onnx_cpp2py_export.checker.ValidationError is proto.ValidationError
checker.check_model(model, full_check=True)
inferred = shape_inference.infer_shapes(model, strict_mode=True)
assert [d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim] == [2, 3]
try:
    checker.check_model(onnx.ModelProto())
except checker.ValidationError:
    pass
else:
    raise AssertionError("the empty model passed")
feed = np.array([[-1, 0, 2], [3, -4, 5]], np.float32)
(got,) = onnx.reference.ReferenceEvaluator(model).run(None, {model.graph.input[0].name: feed})
np.testing.assert_allclose(got, np.maximum(feed, 0) * 2 + 1)
node = helper.make_node("Relu", ["a"], ["b"], name="r")
assert node.name == "r" and numpy_helper.to_array(numpy_helper.from_array(feed)).shape == (2, 3)
assert version_converter.convert_version(model, 18).opset_import[0].version == 18
print("ok")
"""


def test_onnx_imported_after_ngrules_works_in_full_on_the_same_classes():
    proc = subprocess.run([sys.executable, "-c", AFTER], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
