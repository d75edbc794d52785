"""ONNX import: dimensions become named axes by unification, values match onnxruntime, errors
name the op and the node."""

import subprocess
import sys

import numpy as np
import pytest

import ngrules as ng

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ngrules.interop.onnx import OnnxError, UnsupportedOp  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402

F32 = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "t", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def value(name, shape, elem=F32):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def run_ort(m, feeds):
    return ort.InferenceSession(m.SerializeToString()).run(None, feeds)


def test_matmul_contracts_exactly_the_shared_dimension():
    rng = np.random.default_rng(0)
    m = model(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        [value("x", ["batch", 4])],
        [value("y", ["batch", 3])],
        [init("w", rng.standard_normal((4, 3)))],
    )
    whole = ng.toposort(ng.from_onnx(m, lengths={"batch": 5}))
    assert [n.op for n in whole if n.op in ("MatMul", "Dot")] == ["MatMul"]  # kept whole
    (y,) = ng.from_onnx(m, lengths={"batch": 5}, keep_whole=False)  # its primitives
    (dot,) = [n for n in ng.toposort([y]) if n.op == "Dot"]
    w, x = dot.args  # weights first, as ngraph writes Dot(w, x)
    assert x.axes.names == ("batch", "x_d1") and w.op == "Constant"
    assert dot.attrs == {} and (x.axes & w.axes).names == ("x_d1",)
    assert y.axes.names == ("batch", "w_d1")
    feed = rng.standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(ng.execute([y], {"x": feed})[0], run_ort(m, {"x": feed})[0],
                               rtol=1e-5)


def test_conv_and_batchnorm_share_the_channel_axis_with_their_parameters():
    rng = np.random.default_rng(1)
    params = [init(n, rng.uniform(0.5, 1.5, 4)) for n in ("s", "b", "mu", "var")]
    m = model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
            helper.make_node("BatchNormalization", ["c", "s", "b", "mu", "var"], ["y"]),
        ],
        [value("x", ["N", 3, 5, 5])],
        [value("y", ["N", 4, 5, 5])],
        [init("w", rng.standard_normal((4, 3, 3, 3))), *params],
    )
    imported = import_model(m, lengths={"N": 2})
    naming = imported.naming
    assert [a.name for a in naming.axes("x")] == ["N", "C", "H", "W"]
    assert [a.name for a in naming.axes("c")] == ["N", "C_1", "H_1", "W_1"]  # new positions
    assert [a.name for a in naming.axes("s")] == ["C_1"]
    assert naming.axes("w")[1].name == "C"  # the kernel's input channel is x's channel
    feed = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    got = ng.execute(imported.outputs, {"x": feed})[0]
    np.testing.assert_allclose(got, run_ort(m, {"x": feed})[0], rtol=1e-4, atol=1e-5)


def test_axis_names_override_and_a_dim_param_names_its_axis():
    m = model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [value("x", ["rows", 3])],
        [value("y", ["rows", 3])],
    )
    (y,) = ng.from_onnx(m, lengths={"rows": 2})
    assert y.axes.names == ("rows", "x_d1")
    (y,) = ng.from_onnx(m, lengths={"rows": 2}, axis_names={"x": [None, "F"]})
    assert y.axes.names == ("rows", "F")


@pytest.mark.parametrize(
    "names, message",
    [({"z": ["N"]}, r"no input or initializer 'z'"), ({"x": ["N", "F", "G"]}, r"2 axes, 3 names")],
)
def test_axis_names_for_a_value_the_model_lacks_or_too_many_are_errors(names, message):
    m = model([helper.make_node("Relu", ["x"], ["y"])], [value("x", [2, 3])], [value("y", [2, 3])])
    with pytest.raises(ng.NgrulesError, match=message):
        ng.from_onnx(m, axis_names=names)


def test_two_dimensions_of_one_tensor_are_never_one_axis():
    """x @ x for a square x: the contracted dimension cannot share a name with the rows."""
    m = model(
        [helper.make_node("MatMul", ["x", "x"], ["y"])],
        [value("x", [3, 3])],
        [value("y", [3, 3])],
    )
    (y,) = ng.from_onnx(m)
    assert len(set(y.axes.names)) == 2
    feed = np.arange(9, dtype=np.float32).reshape(3, 3)
    np.testing.assert_allclose(ng.execute([y], {"x": feed})[0], feed @ feed)


@pytest.mark.parametrize(
    "shape, target",
    [((2, 3, 4), (6, 4)), ((6, 4), (2, 3, 4)), ((2, 3, 4), (3, 8)), ((4, 1, 6), (2, 12, 1))],
)
def test_reshape_regroups_the_data_in_row_major_order(shape, target):
    m = model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        [value("x", list(shape))],
        [value("y", list(target))],
        [numpy_helper.from_array(np.array(target, dtype=np.int64), "s")],
    )
    (y,) = ng.from_onnx(m)
    feed = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    np.testing.assert_array_equal(ng.execute([y], {"x": feed})[0], feed.reshape(target))


def test_a_merge_becomes_a_flatten_with_the_flattened_axis():
    m = model(
        [helper.make_node("Flatten", ["x"], ["y"], axis=1)],
        [value("x", ["N", 2, 3])],
        [value("y", ["N", 6])],
    )
    (y,) = ng.from_onnx(m, lengths={"N": 4})  # views only: not kept whole
    assert y.op == "Flatten" and y.axes[1].is_flattened
    assert [a.name for a in y.axes[1].components] == ["x_d1", "x_d2"]


def test_symbolic_dimension_without_a_length_is_an_error_naming_it():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [value("x", ["N", 3])],
              [value("y", ["N", 3])])
    with pytest.raises(OnnxError, match=r"give the length of 'N'"):
        ng.from_onnx(m)


def test_unsupported_op_names_the_op_and_the_node_and_lists_the_supported():
    m = model([helper.make_node("Unique", ["x"], ["y"], name="head")], [value("x", [2, 3])],
              [value("y", [2, 3])])
    with pytest.raises(UnsupportedOp) as info:
        ng.from_onnx(m)
    message = info.value.message
    assert "unsupported ONNX op Unique (node 'head')" in message and "MatMul" in message


def test_shape_computations_are_folded_at_import_time():
    """Shape -> Gather -> Concat -> Reshape, as exporters write a flatten."""
    m = model(
        [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0),
            helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
            helper.make_node("Concat", ["n1", "minus"], ["target"], axis=0),
            helper.make_node("Reshape", ["x", "target"], ["y"]),
        ],
        [value("x", [2, 3, 4])],
        [value("y", [2, 12])],
        [numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
         numpy_helper.from_array(np.array([0], dtype=np.int64), "zero1"),
         numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus")],
    )
    (y,) = ng.from_onnx(m, keep_whole=False)
    assert {n.op for n in ng.toposort([y])} == {"Placeholder", "Flatten"}


def test_training_batchnorm_is_written_as_the_fusion_rules_expect():
    m = model(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["y"],
                          training_mode=1)],
        [value("x", [6, 3])],
        [value("y", [6, 3])],
        [init(n, np.ones(3)) for n in ("s", "b", "mu", "var")],
        opset=15,
    )
    (y,) = ng.from_onnx(m)
    result = ng.rewrite([y], ng.load_rules(ng_library()), pipeline="cpu")
    assert result.fired().get("batchnorm_fprop") == 1
    feed = np.random.default_rng(2).standard_normal((6, 3)).astype(np.float32)
    from onnx.reference import ReferenceEvaluator

    want = ReferenceEvaluator(m).run(None, {"x": feed})[0]
    for outputs in ([y], result.outputs):
        np.testing.assert_allclose(ng.execute(outputs, {"x": feed})[0], want, rtol=1e-4,
                                   atol=1e-5)


def ng_library():
    from ngrules.lang.library import library_path

    return library_path()


def test_import_ngrules_does_not_import_onnx():
    code = "import sys, ngrules; assert 'onnx' not in sys.modules; ngrules.from_onnx"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_a_path_that_is_not_a_model_is_an_error(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf at all \xff\xfe")
    with pytest.raises(OnnxError, match="bad.onnx"):
        ng.from_onnx(bad)


def test_erf_is_the_erf_op_and_matches_math_erf():
    import math

    m = model([helper.make_node("Erf", ["x"], ["y"])], [value("x", [401], TensorProto.DOUBLE)],
              [value("y", [401], TensorProto.DOUBLE)])
    (y,) = ng.from_onnx(m)
    x = np.linspace(-6.0, 6.0, 401)
    got = ng.execute([y], {"x": x})[0]
    want = np.array([math.erf(v) for v in x])
    assert y.op == "Erf" and np.max(np.abs(got - want)) < 1e-12


def test_the_import_pauses_the_cyclic_collector_and_restores_it(monkeypatch):
    """The collector's scans cost an import a fifth of its time (bench/tool_stages.py): it is
    off while nodes convert, and as it was afterwards, also when the import fails."""
    import gc

    from ngrules.interop.onnx import importer

    seen = []
    real = importer.Importer.convert
    monkeypatch.setattr(importer.Importer, "convert",
                        lambda self, node: seen.append(gc.isenabled()) or real(self, node))
    m = model([helper.make_node("Relu", ["x"], ["y"])], [value("x", [2])], [value("y", [2])])
    assert gc.isenabled()
    import_model(m)
    assert seen == [False] and gc.isenabled()
    bad = model([helper.make_node("Relu", ["z"], ["y"])], [value("x", [2])], [value("y", [2])])
    with pytest.raises(OnnxError):
        import_model(bad)
    assert gc.isenabled()
