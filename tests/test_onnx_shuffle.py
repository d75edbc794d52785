"""A channel shuffle read by convolutions absorbed into their weights (`exporting.passes.shuffle`):
the Reshape -> Transpose -> Reshape go, the model computes the same under onnxruntime; a shuffle
something else reads is one Gather."""

from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_cases import check_against_ort  # noqa: E402

import ngrules as ng  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402

RNG = np.random.default_rng(0)


def _shuffled(readers, outputs: dict, shape_out=(2, 8, 4, 4), inits=None):
    """x[2, 8, 4, 4] -> a 1x1 Conv, channels shuffled in 2 groups (`s`), then `readers`."""
    n = helper.make_node
    nodes = [n("Conv", ["x", "w0"], ["c"]), n("Reshape", ["c", "s1"], ["r1"]),
             n("Transpose", ["r1"], ["t"], perm=[0, 2, 1, 3, 4]),
             n("Reshape", ["t", "s2"], ["s"]), *readers]
    arrays = {"w0": RNG.standard_normal((8, 8, 1, 1)), "s1": np.array([2, 2, 4, 4, 4]),
              "s2": np.array(shape_out), **(inits or {})}
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 4, 4])],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in outputs.items()],
        [numpy_helper.from_array(v.astype(np.int64 if v.dtype.kind == "i" else np.float32), k)
         for k, v in arrays.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _written(model):
    feeds = {"x": RNG.standard_normal((2, 8, 4, 4)).astype(np.float32)}
    check_against_ort(model, feeds)  # imported, exported: the same values as the model's
    exported = ng.to_onnx(import_model(model).outputs)
    return Counter(n.op_type for n in exported.graph.node)


def test_a_shuffle_read_by_a_conv_and_a_depthwise_conv_goes():
    """Read by a 1x1 Conv and by a depthwise Conv (with a bias) whose output a 1x1 Conv reads."""
    n = helper.make_node
    readers = [n("Conv", ["s", "w1"], ["a"]),
               n("Conv", ["s", "wd", "bd"], ["d"], group=8, pads=[1, 1, 1, 1]),
               n("Conv", ["d", "w2"], ["b"]), n("Add", ["a", "b"], ["y"])]
    inits = {"w1": RNG.standard_normal((3, 8, 1, 1)), "wd": RNG.standard_normal((8, 1, 3, 3)),
             "bd": RNG.standard_normal(8), "w2": RNG.standard_normal((3, 8, 1, 1))}
    ops = _written(_shuffled(readers, {"y": [2, 3, 4, 4]}, inits=inits))
    assert not ops["Transpose"] and not ops["Reshape"] and ops["Conv"] == 4, ops


def test_a_shuffle_that_changes_the_rank_leaves_one_reshape():
    readers = [helper.make_node("Conv", ["s", "w1"], ["y"])]
    inits = {"w1": RNG.standard_normal((3, 8, 1))}
    ops = _written(_shuffled(readers, {"y": [2, 3, 16]}, (2, 8, 16), inits))
    assert not ops["Transpose"] and ops["Reshape"] == 1, ops


def test_a_shuffle_something_else_reads_is_one_gather():
    """A reader that cannot absorb it (a Relu): the three nodes are one Gather of channels
    (they stayed three: the onnx package's ShuffleNet tied onnxsim at 154 nodes)."""
    readers = [helper.make_node("Conv", ["s", "w1"], ["a"]), helper.make_node("Relu", ["s"], ["y"])]
    inits = {"w1": RNG.standard_normal((3, 8, 1, 1))}
    ops = _written(_shuffled(readers, {"y": [2, 8, 4, 4], "a": [2, 3, 4, 4]}, inits=inits))
    assert ops["Gather"] == 1 and not ops["Transpose"] and not ops["Reshape"], ops


def test_a_shuffle_read_by_a_grouped_conv_is_one_gather():
    """ShuffleNet v1's shuffle reaches a grouped 1x1 Conv through a depthwise one: the groups
    it mixes cannot take it in their weights."""
    n = helper.make_node
    readers = [n("Conv", ["s", "wd"], ["d"], group=8, pads=[1, 1, 1, 1]),
               n("Conv", ["d", "wg"], ["y"], group=2)]
    inits = {"wd": RNG.standard_normal((8, 1, 3, 3)), "wg": RNG.standard_normal((4, 4, 1, 1))}
    ops = _written(_shuffled(readers, {"y": [2, 4, 4, 4]}, inits=inits))
    assert ops == Counter({"Conv": 3, "Gather": 1}), ops
