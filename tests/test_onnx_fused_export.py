"""Fused ops written as ONNX ops, each run by onnxruntime against the numpy executor: Softmax
and LogSoftmax with their axis, Relu with a slope as LeakyRelu, inference batchnorm as
BatchNormalization, layer norm as LayerNormalization, GELU as Gelu (opset 20) or the function
with its body (before), nn.rules' declared LayerNorm and Gelu."""

from collections import Counter

import numpy as np
import pytest

import ngrules as ng

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ngrules.interop.onnx.importer import import_model  # noqa: E402
from ngrules.lang.library import load_library  # noqa: E402

N, C, H = ng.make_axis(4, name="N"), ng.make_axis(3, name="C"), ng.make_axis(5, name="H")
RNG = np.random.default_rng(0)


def exported_ops(outputs, feeds, opset=17, rtol=1e-5):
    """Export, check, run under onnxruntime against the executor; the ops written."""
    model = ng.to_onnx(outputs, opset=opset)
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    got = session.run(None, {k: v for k, v in feeds.items() if k in names})
    for g, want in zip(got, ng.execute(outputs, feeds)):
        np.testing.assert_allclose(g, want, rtol=rtol, atol=rtol)
    return Counter(n.op_type for n in model.graph.node)


def imported(op: str, inputs, shape, opset=17, **attrs):
    """A one-node ONNX model of an op that keeps its operand's shape, imported: its output
    node and the feed for `x`."""
    x = RNG.standard_normal(shape).astype(np.float32)
    inits = [numpy_helper.from_array(v, k) for k, v in inputs.items()]
    node = helper.make_node(op, ["x", *inputs], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(shape))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, list(shape))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return import_model(model).outputs, {"x": x}


@pytest.mark.parametrize("axes", [[H], [C, H]])
def test_softmax_over_one_axis_is_softmax(axes):
    x = ng.placeholder([N, C, H], name="x")
    ops = exported_ops([ng.make_node("Softmax", (x,), normalization_axes=axes)],
                       {"x": RNG.standard_normal((4, 3, 5)).astype(np.float32)})
    assert (ops["Softmax"] == 1) == (len(axes) == 1), ops
    assert not ops["Transpose"]


def test_log_softmax_comes_back_as_log_softmax():
    outputs, feeds = imported("LogSoftmax", {}, (4, 3, 5), axis=1)
    assert exported_ops(outputs, feeds) == Counter({"LogSoftmax": 1})


def test_relu_with_a_slope_is_leaky_relu():
    x = ng.placeholder([N, C], name="x")
    ops = exported_ops([ng.make_node("Relu", (x,), slope=0.1)],
                       {"x": RNG.standard_normal((4, 3)).astype(np.float32)})
    assert ops == Counter({"LeakyRelu": 1})


def _per_channel(*names):
    return {n: RNG.uniform(0.5, 1.5, 3).astype(np.float32) for n in names}


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5, 5)])
def test_inference_batchnorm_is_batch_normalization(shape):
    outputs, feeds = imported("BatchNormalization", _per_channel("s", "b", "m", "v"), shape,
                              epsilon=1e-3)
    assert exported_ops(outputs, feeds) == Counter({"BatchNormalization": 1})


def test_batchnorm_whose_scale_of_one_was_simplified_away_is_still_one_op():
    params = _per_channel("s", "b", "m", "v")
    params["s"] = np.ones(3, np.float32)
    outputs, feeds = imported("BatchNormalization", params, (2, 3, 4))
    rewritten = ng.rewrite(outputs, load_library(), pipeline="cpu").outputs
    assert exported_ops(rewritten, feeds) == Counter({"BatchNormalization": 1})


@pytest.mark.parametrize("pipeline", ["cpu", "fuse_nn", "inference"])
@pytest.mark.parametrize("scale", ["ones", "random"])
def test_a_batchnorm_no_convolution_precedes_stays_one_op_once_constants_fold(pipeline, scale):
    """Every pipeline ends folding constants: γ/√(σ² + ε) becomes one per-channel constant,
    still written as one BatchNormalization (not Sub, Mul, Add), equal to the executor's."""
    params = _per_channel("s", "b", "m", "v")
    if scale == "ones":
        params["s"] = np.ones(3, np.float32)
    outputs, feeds = imported("BatchNormalization", params, (2, 3, 4, 4), epsilon=1e-3)
    result = ng.rewrite(outputs, load_library(), pipeline=pipeline)
    assert not {"Sqrt", "Reciprocal"} & {n.op for n in ng.toposort(result.outputs)}
    assert exported_ops(result.outputs, feeds) == Counter({"BatchNormalization": 1})


def test_layer_normalization_comes_back_as_itself():
    params = {"g": RNG.standard_normal(5).astype(np.float32),
              "b": RNG.standard_normal(5).astype(np.float32)}
    outputs, feeds = imported("LayerNormalization", params, (2, 4, 5), axis=-1, epsilon=1e-5)
    assert exported_ops(outputs, feeds) == Counter({"LayerNormalization": 1})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("opset", [17, 20])
def test_gelu_is_gelu_or_its_function(approximate, opset):
    outputs, feeds = imported("Gelu", {}, (4, 6), opset=20, approximate=approximate)
    ops = exported_ops(outputs, feeds, opset=opset)
    if opset >= 20:
        assert ops == Counter({"Gelu": 1})
    else:  # one node of the ngrules domain, its body in standard ops
        assert ops == Counter({"GeluTanh" if approximate == "tanh" else "Gelu": 1})


@pytest.fixture(scope="module")
def library():
    return load_library()  # declares nn.rules' LayerNorm and Gelu


def test_declared_layer_norm_is_layer_normalization(library):
    x = ng.placeholder([N, C, H], name="x")
    gamma = ng.constant(RNG.standard_normal((3, 5)).astype(np.float32), [C, H])
    beta = ng.constant(RNG.standard_normal((5, 3)).astype(np.float32), [H, C])
    y = ng.make_node("LayerNorm", (x, gamma, beta), axes=ng.make_axes([C, H]), eps=1e-5)
    ops = exported_ops([y], {"x": RNG.standard_normal((4, 3, 5)).astype(np.float32)},
                       rtol=1e-4)
    assert ops == Counter({"LayerNormalization": 1})


def test_declared_layer_norm_over_leading_axes_moves_them_last(library):
    x = ng.placeholder([C, N], name="x")
    gamma = ng.constant(RNG.standard_normal(3).astype(np.float32), [C])
    y = ng.make_node("LayerNorm", (x, gamma, gamma), axes=ng.make_axes([C]), eps=1e-5)
    ops = exported_ops([y], {"x": RNG.standard_normal((3, 4)).astype(np.float32)}, rtol=1e-4)
    assert ops["LayerNormalization"] == 1 and ops["Transpose"] == 2  # in and out of [N, C]


@pytest.mark.parametrize("opset", [17, 20])
def test_declared_gelu_is_gelu(library, opset):
    x = ng.placeholder([N, C], name="x")
    ops = exported_ops([ng.make_node("Gelu", (x,))],
                       {"x": RNG.standard_normal((4, 3)).astype(np.float32)}, opset=opset)
    assert ops == Counter({"Gelu" if opset >= 20 else "GeluTanh": 1})


@pytest.fixture(scope="module")
def fused_transformer():
    from ngrules.interop.onnx.examples import MODELS

    build, lengths = MODELS["transformer"]
    imp = import_model(build(), lengths=lengths)
    return ng.rewrite(imp.outputs, load_library(), pipeline="fuse_nn")


def test_fuse_nn_writes_a_transformer_with_its_layer_norms(fused_transformer):
    result = fused_transformer
    assert result.fired().get("layer_norm") == 2
    feeds = {"x": RNG.standard_normal((2, 8, 16)).astype(np.float32)}
    ops = exported_ops(result.outputs, feeds, rtol=1e-4)
    assert ops["LayerNormalization"] == 2 and not ops["ReduceMean"]


@pytest.mark.parametrize("opset", [22, 23])
def test_attention_is_onnx_attention_from_opset_23(fused_transformer, opset):
    assert fused_transformer.fired().get("dot_product_attention_scaled") == 1
    feeds = {"x": RNG.standard_normal((2, 8, 16)).astype(np.float32)}
    ops = exported_ops(fused_transformer.outputs, feeds, opset=opset, rtol=1e-4)
    assert ops["Attention"] == (opset >= 23) and (ops["Softmax"] == 0) == (opset >= 23), ops


def test_masked_attention_is_onnx_attention_with_its_mask(library):
    b, h, s, t, d = (ng.make_axis(n, name=x) for n, x in [(2, "B"), (3, "H"), (4, "S"),
                                                          (5, "T"), (6, "D")])
    q = ng.placeholder([b, s, h, d], name="q")  # in any order: written as [B, H, S, D]
    k, v = ng.placeholder([b, h, t, d], name="k"), ng.placeholder([t, b, h, d], name="v")
    mask = ng.placeholder([t, b, s], name="mask")  # broadcast over the heads
    y = ng.make_node("MaskedDotProductAttention", (q, k, v, mask),
                     qk_axes=ng.make_axes([b, s, h, t, d]), key_axes=ng.make_axes([d]),
                     softmax_axes=ng.make_axes([t]), pv_axes=ng.make_axes([b, s, h, t, d]),
                     value_axes=ng.make_axes([t]), scale=0.4)
    feeds = {name: RNG.standard_normal([a.length for a in x.axes]).astype(np.float32)
             for name, x in (("q", q), ("k", k), ("v", v), ("mask", mask))}
    ops = exported_ops([y], feeds, opset=23, rtol=1e-4)
    assert ops["Attention"] == 1 and not ops["Softmax"], ops
    short = y.with_args((q, k, v, ng.placeholder([b, t], name="mask")))  # not over S: body
    ops = exported_ops([short], {**feeds, "mask": feeds["mask"][:, :, 0].T}, opset=23, rtol=1e-4)
    assert ops["Attention"] == 0 and ops["Softmax"] == 1, ops


def test_a_node_of_constants_is_written_as_its_value():
    x = ng.placeholder([C], name="x")
    c = ng.exp(ng.constant(np.arange(3, dtype=np.float32), [C]))
    a, b = ng.make_axis(100, name="A"), ng.make_axis(100, name="B")
    big = ng.broadcast(ng.constant(np.float32(2.0)), [a, b, C])  # 30,000 elements
    model = ng.to_onnx([x + c, ng.sum(big + 1.0, reduction_axes=[a, b])])
    written = {n.op_type for n in model.graph.node}
    assert "Exp" not in written and "ReduceSum" in written  # the big sum is not folded
    assert max(int(np.prod(t.dims)) for t in model.graph.initializer) <= 3
