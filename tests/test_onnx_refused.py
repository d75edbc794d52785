"""Never a written model that onnxruntime refuses (issue 34, item 5): the exporter checks what it
writes (onnx's checker, onnxruntime's rules, a session) and names the node that fails; the two
refusals seen on real models (a ViT's Gemm bias, a BERT's GatherElements fold) are fixed."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ngrules.interop.onnx import OnnxError  # noqa: E402
from ngrules.interop.onnx.exporter import to_onnx  # noqa: E402
from ngrules.interop.onnx.exporting.passes import refused  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402

RNG = np.random.default_rng(0)


def _model(nodes, inputs, outputs, inits, opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _vit_block(tokens=5, width=8, heads=2, out=6):
    """A ViT's attention output at batch 1: heads merged back by Reshape/Transpose (the unit
    batch leaves the product 2-D, a Gemm), plus a residual [1, T, E]: not a bias Gemm's C
    may take (onnxruntime: 'Invalid bias shape for broadcast')."""
    f = np.float32
    inits = {"w": RNG.standard_normal([width, out]).astype(f),
             "w2": RNG.standard_normal([width, out]).astype(f),
             "w3": RNG.standard_normal([out, width]).astype(f),
             "s4": np.array([1, tokens, heads, width // heads]),
             "s3": np.array([1, tokens, width])}
    nodes = [
        helper.make_node("Reshape", ["x", "s4"], ["r4"]),
        helper.make_node("Transpose", ["r4"], ["t"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["t"], ["t2"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["t2", "s3"], ["r3"]),
        helper.make_node("MatMul", ["r3", "w"], ["h"]),
        helper.make_node("MatMul", ["x", "w2"], ["z"]),
        helper.make_node("Add", ["z", "h"], ["y0"]),
        helper.make_node("MatMul", ["y0", "w3"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, tokens, width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, tokens, width])
    return _model(nodes, [x], [y], inits)


def test_a_residual_added_to_a_2d_product_is_not_written_as_a_3d_gemm_bias():
    model = _vit_block()
    whole = import_model(model)  # ONNX's MatMul and Add kept whole (onnx-comp): written back so
    again = to_onnx(whole.outputs, output_names=whole.output_names)
    assert "Gemm" not in [n.op_type for n in again.graph.node]
    imported = import_model(model, keep_whole=False)  # as primitives: the exporter's Gemm form
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    inferred = onnx.shape_inference.infer_shapes(out)
    shapes = {v.name: len(v.type.tensor_type.shape.dim)
              for v in [*inferred.graph.value_info, *inferred.graph.input]}
    gemms = [n for n in out.graph.node if n.op_type == "Gemm"]
    assert gemms and all(shapes[n.input[2]] <= 2 for n in gemms if len(n.input) > 2)
    x = RNG.standard_normal([1, 5, 8]).astype(np.float32)
    np.testing.assert_allclose(_run(out, {"x": x}), _run(model, {"x": x}), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_run(again, {"x": x}), _run(model, {"x": x}), rtol=1e-4,
                               atol=1e-5)


def _gemm(c_shape):
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])
    node = helper.make_node("Gemm", ["a", "w", "c"], ["y"], name="head")
    return _model([node], [a], [y], {"w": np.ones([4, 5], np.float32),
                                     "c": np.ones(c_shape, np.float32)})


@pytest.mark.parametrize("c_shape", [[1, 1, 5], [3], [5, 1]])
def test_a_gemm_bias_onnxruntime_refuses_is_an_error_naming_the_node(c_shape):
    model = _gemm(c_shape)
    onnx.checker.check_model(model, full_check=True)  # onnx's checker lets it through
    with pytest.raises(OnnxError, match="Gemm node 'head'.*bias C"):
        refused.check(model, {})


@pytest.mark.parametrize("c_shape", [[5], [1, 5], [3, 1], [3, 5], [1], []])
def test_the_gemm_biases_onnxruntime_takes_pass(c_shape):
    refused.check(_gemm(c_shape), {})


def test_a_node_onnxruntime_has_no_kernel_for_is_refused_by_name():
    """onnx's checker takes a Relu of int64 (opset 14 allows it); onnxruntime has no kernel
    for it: the session built on the written model says so, and the error names the node
    (by the value it writes, having no name)."""
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [2])
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [y], {})
    onnx.checker.check_model(model, full_check=True)
    with pytest.raises(OnnxError, match="onnxruntime .* refuses .*Relu node 'y'.*implementation"):
        refused.check(model, {})
    assert model.graph.node[0].name == ""  # the name it was given for the check is taken back


def test_gather_elements_over_more_than_64_rows_folds_as_onnxruntime_computes_it():
    """BERT's token type ids: GatherElements(buffer [1, 256], position ids [1, 16]), folded at
    import (onnx's reference evaluator failed: 'cannot reshape array of size 1')."""
    seq = 16
    inits = {"buffer": (np.arange(256) % 3).reshape(1, 256).astype(np.int64),
             "positions": np.arange(256).reshape(1, 256).astype(np.int64) * 7 % 256,
             "start": np.array([0]), "end": np.array([seq]), "axis": np.array([1]),
             "table": RNG.standard_normal([3, 4]).astype(np.float32)}
    nodes = [helper.make_node("Slice", ["positions", "start", "end", "axis"], ["ids"]),
             helper.make_node("GatherElements", ["buffer", "ids"], ["types"], axis=1),
             helper.make_node("Gather", ["table", "types"], ["emb"]),
             helper.make_node("Add", ["x", "emb"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, 4])
    model = _model(nodes, [x], [y], inits)
    imported = import_model(model)
    out = to_onnx(imported.outputs, output_names=imported.output_names)
    feeds = {"x": RNG.standard_normal([1, seq, 4]).astype(np.float32)}
    np.testing.assert_allclose(_run(out, feeds), _run(model, feeds), rtol=1e-6)


def _int_relu():
    """A Relu of int64: onnx's checker takes it (opset 14), onnxruntime has no kernel for it."""
    x = helper.make_tensor_value_info("x", TensorProto.INT64, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [2, 3])
    return _model([helper.make_node("Relu", ["x"], ["y"])], [x], [y], {})


def test_apply_writes_a_model_onnxruntime_refuses_as_read_with_a_warning(tmp_path, capsys):
    """A model made for another runtime (onnxruntime refuses the input for want of a kernel for
    its Relu): the output is no less runnable, so it is written, with a warning naming the op
    and saying that onnxruntime refuses the input as well; exit 0."""
    from ngrules.cli.main import main

    onnx.save(_int_relu(), tmp_path / "m.onnx")
    code = main(["apply", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "out.onnx")])
    assert code == 0 and (tmp_path / "out.onnx").exists()
    err = capsys.readouterr().err
    assert "warning: written all the same: onnxruntime refuses the input model as well, " \
        "for the same reason (no kernel for Relu" in err and "Relu node 'y'" in err
    out = onnx.load(tmp_path / "out.onnx")
    assert [(n.op_type, list(n.input), list(n.output)) for n in out.graph.node] == \
        [("Relu", ["x"], ["y"])]


@pytest.mark.parametrize("op, elem", [("Max", TensorProto.INT16), ("Min", TensorProto.UINT16),
                                      ("TopK", TensorProto.UINT64)])
def test_a_node_test_onnxruntime_has_no_kernel_for_round_trips_with_a_warning(op, elem):
    """The backend node tests onnxruntime 1.32 runs none of (Max/Min of int16, TopK of uint64):
    written back as read, with a `RefusedAsRead` warning, not an error."""
    x = helper.make_tensor_value_info("x", elem, [3, 4])
    if op == "TopK":
        node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)
        outs = [helper.make_tensor_value_info("v", elem, [3, 2]),
                helper.make_tensor_value_info("i", TensorProto.INT64, [3, 2])]
        model = _model([node], [x], outs, {"k": np.array([2])})
    else:
        node = helper.make_node(op, ["x", "z"], ["y"])
        outs = [helper.make_tensor_value_info("y", elem, [3, 4])]
        z = helper.make_tensor_value_info("z", elem, [3, 4])
        model = _model([node], [x, z], outs, {})
    imported = import_model(model)
    with pytest.warns(refused.RefusedAsRead, match=f"no kernel for {op}"):
        out = to_onnx(imported.outputs, output_names=imported.output_names, opset=17)
    assert [n.op_type for n in out.graph.node] == [op]


def test_a_refusal_the_input_did_not_have_stays_an_error():
    """The input runs under onnxruntime (a float Relu); a graph built on its input that casts to
    int64 before the Relu has a node onnxruntime refuses: an error naming the node."""
    from ngrules.ir import builders as F
    from ngrules.ir.graph import make_node

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    imported = import_model(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y], {}))
    cast = F.cast(imported.inputs["x"], np.int64)
    with pytest.raises(OnnxError, match="refuses the written model: Relu node"):
        to_onnx([make_node("Relu", [cast])])
    with pytest.warns(refused.RefusedAsRead):  # refused as read: same op, written
        imported = import_model(_int_relu())
        to_onnx(imported.outputs, output_names=imported.output_names)
