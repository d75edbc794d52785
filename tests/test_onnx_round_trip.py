"""What ngrules writes back is never larger than what it read: the example models and ONNX's
backend node tests, imported and exported with no rule and through each shipped pipeline, give
back no more ONNX nodes, no Transpose the input did not have, and the same values under
onnxruntime."""

from collections import Counter

import numpy as np
import pytest

import ngrules as ng

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ngrules.interop.onnx.backend import model_ops  # noqa: E402
from ngrules.interop.onnx.examples import MODELS  # noqa: E402
from ngrules.interop.onnx.importer import import_model, supported_ops  # noqa: E402
from ngrules.lang.library import load_library  # noqa: E402

PIPELINES = (None, "cpu", "fuse_nn", "inference")


@pytest.fixture(scope="module")
def rules():
    return load_library()


def ops(model) -> Counter:
    return Counter(n.op_type for n in model.graph.node)


def random_feeds(model, lengths, seed=0):
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name not in inits:
            dims = vi.type.tensor_type.shape.dim
            shape = [lengths.get(d.dim_param, d.dim_value) for d in dims]
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in wanted})


def round_trip(model, lengths, rules, pipeline, keep_whole=True):
    imported = import_model(model, lengths=lengths, keep_whole=keep_whole)
    outputs = imported.outputs
    if pipeline is not None:
        outputs = ng.rewrite(outputs, rules, pipeline=pipeline).outputs
    exported = ng.to_onnx(outputs, output_names=imported.output_names)
    onnx.checker.check_model(exported, full_check=True)
    return exported


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_example_models_come_back_no_larger_and_equal(name, pipeline, rules):
    build, lengths = MODELS[name]
    model = build()
    exported = round_trip(model, lengths, rules, pipeline)
    before, after = ops(model), ops(exported)
    assert sum(after.values()) <= sum(before.values()), (before, after)
    assert after["Transpose"] <= before["Transpose"], after
    assert not after["Expand"], after
    feeds = random_feeds(model, lengths)
    for got, want in zip(run(exported, feeds), run(model, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_with_no_rule_each_network_op_comes_back_as_itself(rules):
    """The CNN: every Conv, BatchNormalization, Relu, MaxPool, Flatten and Gemm is written
    as that op, in NCHW, with no transpose around the convolutions."""
    build, lengths = MODELS["cnn"]
    model = build()
    assert ops(round_trip(model, lengths, rules, None)) == ops(model)
    transformer = ops(round_trip(MODELS["transformer"][0](), {"B": 2}, rules, None))
    assert transformer["LayerNormalization"] == 2 and transformer["Softmax"] == 1
    # the two attention products are MatMuls over operands transposed as the input has them
    # (onnxruntime runs an Einsum several times slower than a MatMul at these sizes)
    assert transformer["Transpose"] <= 4 and not transformer["Einsum"]


@pytest.mark.parametrize("pipeline", ["cpu", "fuse_nn", "inference"])
def test_every_pipeline_folds_batchnorm_into_the_weights(rules, pipeline):
    """Every shipped pipeline begins with fold_batchnorm; its scaled weights are constants:
    they leave as initializers, so the Conv-BatchNormalization pairs are single Convs."""
    build, lengths = MODELS["cnn"]
    model = build()
    after = ops(round_trip(model, lengths, rules, pipeline))
    assert after["BatchNormalization"] == 0 and after["Conv"] == 2
    assert not after["Sqrt"] and not after["Mul"]
    assert sum(after.values()) == sum(ops(model).values()) - 2


@pytest.mark.parametrize("pool", ["GlobalAveragePool", "ReduceMean"])
def test_a_kept_spatial_mean_read_by_a_conv_is_a_global_average_pool(pool):
    """Squeeze-excitation (x * sigmoid(conv(mean over H, W))) built from primitives (the
    model's ops lowered): the mean, read by a Conv, is written as GlobalAveragePool whichever
    way it came (onnxruntime keeps that op in its NCHWc layout with the convolutions); the
    same values. Read whole, the model's own op comes back."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 4, 1, 1)).astype(np.float32), "w")
    mean = (helper.make_node("GlobalAveragePool", ["x"], ["m"]) if pool == "GlobalAveragePool"
            else helper.make_node("ReduceMean", ["x"], ["m"], axes=[2, 3], keepdims=1))
    nodes = [mean, helper.make_node("Conv", ["m", "w"], ["c"]),
             helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    graph = helper.make_graph(nodes, "se", [helper.make_tensor_value_info("x", 1, [2, 4, 5, 5])],
                              [helper.make_tensor_value_info("y", 1, [2, 4, 5, 5])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert ops(round_trip(model, {}, None, None)) == ops(model)
    out = round_trip(model, {}, None, None, keep_whole=False)
    assert ops(out)["GlobalAveragePool"] == 1 and not ops(out)["ReduceMean"], ops(out)
    feeds = random_feeds(model, {})
    np.testing.assert_allclose(run(out, feeds)[0], run(model, feeds)[0], rtol=1e-5, atol=1e-6)


#: Ops whose importer form the exporter writes back as the op itself (one IR op, or a form it
#: recognises); a backend test built only of these must come back no larger.
SAME_SIZE = {
    "Abs", "Add", "ArgMax", "ArgMin", "BatchNormalization", "Cast", "Concat", "Conv", "Div",
    "Equal", "Erf", "Exp", "Flatten", "Gelu", "Gemm", "Greater", "Identity", "LayerNormalization",
    "LeakyRelu", "Less", "Log", "LogSoftmax", "MatMul", "MaxPool", "Mul", "Neg", "Reciprocal",
    "ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum", "Relu", "Sigmoid", "Slice", "Softmax",
    "Sqrt", "Squeeze", "Sub", "Tanh", "Transpose", "Unsqueeze", "Where",
}


def _array(value) -> np.ndarray:
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return np.asarray(value)


def _backend_sample(cases, per_op: int = 2):
    seen: Counter = Counter()
    known = set(supported_ops())
    for case in cases:
        if case.kind != "node" or case.model.functions:
            continue
        if not set(model_ops(case.model)) <= known:
            continue
        kinds = {n.op_type for n in case.model.graph.node}
        # LayerNormalization's mean and inverse deviation outputs come back as primitives
        one_output = all(sum(map(bool, n.output)) == 1 for n in case.model.graph.node)
        if one_output and kinds <= SAME_SIZE and any(seen[o] < per_op for o in kinds):
            seen.update(kinds)
            yield case


@pytest.mark.xdist_group("onnx_node_cases")  # with test_onnx_backend: the cases built once
def test_backend_node_tests_come_back_no_larger_with_no_new_transpose(onnx_node_cases):
    checked = 0
    for case in _backend_sample(onnx_node_cases):
        inputs, expected = case.data_sets[0]
        names = [i.name for i in case.model.graph.input
                 if i.name not in {t.name for t in case.model.graph.initializer}]
        feeds = dict(zip(names, (_array(v) for v in inputs)))
        steering = {k: v for k, v in feeds.items() if v.dtype.kind in "iu"}  # shapes, indices
        try:
            imported = import_model(case.model, constants=steering)
        except ng.NgrulesError:  # refused for a stated reason (dtype, empty dimension, ...)
            continue
        exported = ng.to_onnx(imported.outputs, output_names=imported.output_names)
        before, after = ops(case.model), ops(exported)
        assert sum(after.values()) <= sum(before.values()), (case.name, before, after)
        assert after["Transpose"] <= before["Transpose"], (case.name, after)
        for got, want in zip(run(exported, feeds), expected):
            np.testing.assert_allclose(np.asarray(got), _array(want), rtol=case.rtol,
                                       atol=case.atol, err_msg=case.name)
        checked += 1
    assert checked >= 50, checked


def _written(model, feeds, keep_whole=True) -> Counter:
    """The ops of the model written back with no rule, checked equal under onnxruntime."""
    from onnx_cases import check_against_ort

    from ngrules.interop.onnx.exporter import to_onnx

    imported = import_model(model, keep_whole=keep_whole)
    check_against_ort(model, feeds)
    return ops(to_onnx(imported.outputs, output_names=imported.output_names))


def test_a_split_comes_back_as_one_split():
    """A Split is read as slices; slices of one axis that do not overlap are written as one
    Split, a gap between them as an output nothing reads."""
    from onnx import TensorProto, helper
    from onnx_cases import node_model

    x = np.arange(24, dtype=np.float32).reshape(2, 12)
    model = node_model("Split", {"x": x}, {"s": np.array([3, 4, 5])}, n_out=3, axis=1)
    assert _written(model, {"x": x}) == Counter({"Split": 1})
    inits = [onnx.numpy_helper.from_array(np.array(v, np.int64), n)
             for v, n in (([0], "a"), ([3], "b"), ([4], "c"), ([12], "d"), ([1], "ax"))]
    nodes = [helper.make_node("Slice", ["x", "a", "b", "ax"], ["y0"]),
             helper.make_node("Slice", ["x", "c", "d", "ax"], ["y1"])]
    outs = [helper.make_tensor_value_info(y, TensorProto.FLOAT, [2, k])
            for y, k in (("y0", 3), ("y1", 8))]
    graph = helper.make_graph(nodes, "gap", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 12])], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert _written(model, {"x": x}) == Counter({"Split": 1})


def test_a_gather_nd_that_reads_in_order_and_a_mask_and_add_no_nodes():
    """torch's attention mask: GatherND at every position in order (a reshape) and And with a
    constant over ONNX's broadcasting, written as one view (an Unsqueeze: it only inserts a
    dimension of length 1) and one And (no Gather, Expand), whether or not the importer keeps
    ops whole (this GatherND is only a view)."""
    from onnx import TensorProto, helper

    grid = np.stack(np.meshgrid(np.arange(2), np.arange(8), indexing="ij"), -1)
    inits = [onnx.numpy_helper.from_array(grid.reshape(2, 1, 1, 8, 2).astype(np.int64), "i"),
             onnx.numpy_helper.from_array(np.tril(np.ones((8, 8), bool))[None, None], "c")]
    nodes = [helper.make_node("GatherND", ["m", "i"], ["g"]),
             helper.make_node("And", ["c", "g"], ["y"])]
    graph = helper.make_graph(nodes, "mask", [helper.make_tensor_value_info(
        "m", TensorProto.BOOL, [2, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.BOOL, [2, 1, 8, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mask = np.random.default_rng(0).random((2, 8)) > 0.3
    assert _written(model, {"m": mask}, keep_whole=False) == Counter({"Unsqueeze": 1, "And": 1})
    assert _written(model, {"m": mask}) == Counter({"Unsqueeze": 1, "And": 1})


def test_a_model_is_written_back_at_its_own_opset():
    """Imported.opset: the model's opset; written back within what to_onnx writes
    (`written_opset`: below 17 too), an opset-20 Gelu goes out as Gelu (at 17 it is a function
    of the ngrules domain)."""
    from onnx_cases import node_model

    from ngrules.interop.onnx.exporter import to_onnx

    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    imported = import_model(node_model("Gelu", {"x": x}, opset=20))
    assert imported.opset == 20
    assert [n.op_type for n in to_onnx(imported.outputs, opset=imported.opset).graph.node] == [
        "Gelu"]
    assert [n.domain for n in to_onnx(imported.outputs).graph.node] == ["ngrules"]
    from ngrules.cli.graphio import written_opset

    assert import_model(node_model("Relu", {"x": x}, opset=13)).opset == 13
    assert written_opset(None, 13) == 13 and written_opset(None, 26) == 26
    assert written_opset(18, 20) == 18 and written_opset(None, None) is None
