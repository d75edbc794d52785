"""The onnxruntime target: chains of standard nodes written as onnxruntime's contrib ops, each
run by onnxruntime (its own graph optimisations off, so the contrib kernel computes what was
written) against the standard model the same graph gives."""

from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ngrules as ng  # noqa: E402
from ngrules.errors import NgrulesError  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402
from ngrules.lang.library import load_library  # noqa: E402

RNG = np.random.default_rng(0)


def _array(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _model(nodes, inputs, outputs, inits, opset=17):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in inputs.items()],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in outputs.items()],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run(model, feeds):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _conv_model():
    """Conv -> Relu; Conv -> Add(residual) -> Relu; Conv (no bias) -> LeakyRelu."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["s2"]),
        helper.make_node("Relu", ["s2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3"], ["c3"]),
        helper.make_node("LeakyRelu", ["c3"], ["y"], alpha=0.2),
    ]
    inits = {"w1": _array(4, 3, 3, 3), "b1": _array(4), "w2": _array(4, 4, 3, 3),
             "b2": _array(4), "w3": _array(2, 4, 1, 1)}
    return _model(nodes, {"x": [2, 3, 6, 6]}, {"y": [2, 2, 6, 6]}, inits), {"x": _array(2, 3, 6, 6)}


def _batchnorm_model():
    """Conv (bias) -> BatchNormalization -> Relu; Conv (no bias, weights large enough to be kept
    apart from the model until it is written) -> BatchNormalization."""
    def bn(c, x, y):
        stats = {f"{x}_g": RNG.uniform(0.5, 1.5, c), f"{x}_b": _array(c),
                 f"{x}_m": _array(c), f"{x}_v": RNG.uniform(0.5, 1.5, c)}
        node = helper.make_node("BatchNormalization", [x, *stats], [y], epsilon=1e-3)
        return node, {k: v.astype(np.float32) for k, v in stats.items()}

    bn1, stats1 = bn(4, "c1", "n1")
    bn2, stats2 = bn(32, "c2", "y")
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), bn1,
             helper.make_node("Relu", ["n1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]), bn2]
    inits = {"w1": _array(4, 3, 3, 3), "b1": _array(4), "w2": _array(32, 4, 6, 6),
             **stats1, **stats2}
    return _model(nodes, {"x": [2, 3, 6, 6]}, {"y": [2, 32, 3, 3]}, inits), {
        "x": _array(2, 3, 6, 6)}


def _gemm_model():
    """Gemm -> Relu; Gemm -> HardSigmoid (its alpha and beta as FusedGemm's)."""
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1),
             helper.make_node("Relu", ["g"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["g2"]),
             helper.make_node("HardSigmoid", ["g2"], ["y"], alpha=0.3, beta=0.4)]
    inits = {"w": _array(5, 8), "b": _array(5), "w2": _array(5, 4), "b2": _array(4)}
    return _model(nodes, {"x": [3, 8]}, {"y": [3, 4]}, inits), {"x": _array(3, 8)}


def _transformer_model(opset: int):
    """MatMul + bias -> Gelu (erf); a residual sum into a LayerNormalization (post-norm), then
    one read again by the next residual (pre-norm); MatMul + bias -> Gelu (tanh)."""
    gelu = ([helper.make_node("Gelu", ["h"], ["a"])] if opset >= 20 else [
        helper.make_node("Div", ["h", "sqrt2"], ["hd"]), helper.make_node("Erf", ["hd"], ["he"]),
        helper.make_node("Add", ["he", "one"], ["h1"]),
        helper.make_node("Mul", ["h", "h1"], ["hh"]),
        helper.make_node("Mul", ["hh", "half"], ["a"])])
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["h"]),
        *gelu,
        helper.make_node("Add", ["a", "x"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["n"], epsilon=1e-5),
        helper.make_node("Add", ["n", "a"], ["r"]),
        helper.make_node("LayerNormalization", ["r", "gamma", "beta"], ["rn"]),
        helper.make_node("Add", ["rn", "r"], ["t"]),
        *([helper.make_node("MatMul", ["t", "w2"], ["m2"]),
           helper.make_node("Add", ["m2", "b2"], ["h2"]),
           helper.make_node("Gelu", ["h2"], ["y"], approximate="tanh")] if opset >= 20 else
          [helper.make_node("Identity", ["t"], ["y"])]),
    ]
    inits = {"w1": _array(8, 8), "b1": _array(8), "w2": _array(8, 8), "b2": _array(8),
             "gamma": _array(8), "beta": _array(8), "sqrt2": np.float32(np.sqrt(2)),
             "one": np.float32(1), "half": np.float32(0.5)}
    return _model(nodes, {"x": [2, 5, 8]}, {"y": [2, 5, 8]}, inits, opset), {"x": _array(2, 5, 8)}


def _gelu_chains_model(half: float = 0.5):
    """GELU written out as exporters do: erf after a bias (legacy order), then tanh with Pow
    and the half taken first; with `half` other than 0.5, neither is GELU."""
    c = {"sqrt2": np.float32(np.sqrt(2)), "one": np.float32(1), "half": np.float32(half),
         "three": np.float32(3), "k": np.float32(np.sqrt(2 / np.pi)),
         "c": np.float32(0.044715)}
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "w1"], ["m1"]), n("Add", ["m1", "b1"], ["h"]),
        n("Div", ["h", "sqrt2"], ["hd"]), n("Erf", ["hd"], ["he"]), n("Add", ["he", "one"], ["h1"]),
        n("Mul", ["h", "h1"], ["hh"]), n("Mul", ["hh", "half"], ["a"]),
        n("MatMul", ["a", "w2"], ["t"]),
        n("Mul", ["t", "half"], ["t_half"]), n("Pow", ["t", "three"], ["t3"]),
        n("Mul", ["t3", "c"], ["ct3"]), n("Add", ["t", "ct3"], ["inner"]),
        n("Mul", ["inner", "k"], ["scaled"]), n("Tanh", ["scaled"], ["th"]),
        n("Add", ["th", "one"], ["th1"]), n("Mul", ["t_half", "th1"], ["y"]),
    ]
    inits = {"w1": _array(8, 8), "b1": _array(8), "w2": _array(8, 8), **c}
    return _model(nodes, {"x": [2, 5, 8]}, {"y": [2, 5, 8]}, inits), {"x": _array(2, 5, 8)}


@pytest.fixture(scope="module")
def written():
    """model name -> (ops written for onnxruntime, their outputs, the standard export's)."""
    library = load_library()
    out = {}
    cases = {"conv": (_conv_model(), None, 17), "gemm": (_gemm_model(), None, 17),
             "batchnorm": (_batchnorm_model(), None, 17),
             "transformer17": (_transformer_model(17), "fuse_nn", 17),
             "transformer20": (_transformer_model(20), "fuse_nn", 20),
             "gelu_chains": (_gelu_chains_model(), None, 17),
             "not_gelu": (_gelu_chains_model(half=0.6), None, 17)}
    for name, ((model, feeds), pipeline, opset) in cases.items():
        outputs = import_model(model).outputs
        if pipeline:
            outputs = ng.rewrite(outputs, library, pipeline=pipeline).outputs
        standard = ng.to_onnx(outputs, opset=opset)
        fused = ng.to_onnx(outputs, opset=opset, target="onnxruntime")
        ops = Counter(f"{n.domain}.{n.op_type}".lstrip(".") for n in fused.graph.node)
        out[name] = (ops, _run(fused, feeds), _run(standard, feeds), _run(model, feeds))
    return out


@pytest.mark.parametrize("name, want", [
    ("conv", {"com.microsoft.FusedConv": 2, "Conv": 1, "Add": 1}),  # not the residual's
    ("gemm", {"com.microsoft.FusedGemm": 2}),
    ("batchnorm", {"com.microsoft.FusedConv": 1, "Conv": 1, "BatchNormalization": 0}),
    ("transformer17", {"com.microsoft.BiasGelu": 1, "com.microsoft.SkipLayerNormalization": 1}),
    ("transformer20", {"com.microsoft.BiasGelu": 1, "com.microsoft.SkipLayerNormalization": 1,
                       "com.microsoft.FastGelu": 1}),
    ("gelu_chains", {"com.microsoft.BiasGelu": 1, "com.microsoft.FastGelu": 1, "Erf": 0,
                     "Tanh": 0, "MatMul": 2}),
    ("not_gelu", {"com.microsoft.BiasGelu": 0, "com.microsoft.FastGelu": 0, "Erf": 1,
                  "Tanh": 1}),
])
def test_each_contrib_op_computes_the_standard_form(written, name, want):
    ops, fused, standard, original = written[name]
    assert {op: ops[op] for op in want} == want, ops
    for got, std, orig in zip(fused, standard, original):
        np.testing.assert_allclose(got, std, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(std, orig, rtol=1e-4, atol=1e-4)


def test_a_residual_sum_read_again_stays_an_add(written):
    ops, *_ = written["transformer17"]
    assert ops["Add"] == 2 and ops["LayerNormalization"] == 1, ops  # the pre-norm sum, t


def test_a_chain_whose_inner_value_is_an_output_is_not_joined():
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"]),
             helper.make_node("Relu", ["g"], ["y"])]
    inits = {"w": _array(8, 5), "b": _array(5)}
    model = _model(nodes, {"x": [3, 8]}, {"y": [3, 5], "g": [3, 5]}, inits)
    outputs = import_model(model).outputs
    ops = Counter(n.op_type for n in ng.to_onnx(outputs, target="onnxruntime").graph.node)
    assert ops == Counter({"Gemm": 1, "Relu": 1}), ops
    ops = Counter(n.op_type for n in ng.to_onnx(outputs[:1], target="onnxruntime").graph.node)
    assert ops == Counter({"FusedGemm": 1}), ops


def test_an_unknown_target_is_an_error():
    model, _ = _gemm_model()
    with pytest.raises(NgrulesError, match="targets onnx or onnxruntime, not 'tensorrt'"):
        ng.to_onnx(import_model(model).outputs, target="tensorrt")


@pytest.mark.parametrize("opset, want", [
    (17, {"ngrules.Gelu": 1, "ngrules.GeluTanh": 1}),  # the functions, before opset 20
    (20, {"Gelu": 2}),
])
def test_gelu_chains_are_one_node_in_standard_onnx_too(opset, want):
    model, feeds = _gelu_chains_model()
    written = ng.to_onnx(import_model(model).outputs, opset=opset)
    ops = Counter(f"{n.domain}.{n.op_type}".lstrip(".") for n in written.graph.node)
    assert {op: ops[op] for op in [*want, "Erf", "Tanh", "Pow"]} == {
        **want, "Erf": 0, "Tanh": 0, "Pow": 0}, ops
    np.testing.assert_allclose(_run(written, feeds)[0], _run(model, feeds)[0], rtol=1e-4,
                               atol=1e-4)
