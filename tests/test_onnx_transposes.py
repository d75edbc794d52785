"""Transpose -> Reshape -> Transpose written as Reshape -> Transpose
(`exporting.passes.transposes`): the same tensor for every split the Reshape may do, and one
Transpose fewer in a model."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ngrules.interop.onnx.exporting.passes.transposes import _joined, join_in_model


@st.composite
def chains(draw):
    """x's shape, the first perm, a Reshape that splits (and adds or drops units), a perm."""
    shape = draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))
    p1 = draw(st.permutations(range(len(shape))))
    s2 = []
    for length in (shape[i] for i in p1):
        if length == 1 and draw(st.booleans()):
            continue  # a unit dimension dropped
        if length in (4, 6) and draw(st.booleans()):
            s2 += [2, length // 2]
        else:
            s2.append(length)
        if draw(st.integers(0, 4)) == 0:
            s2.append(1)  # a unit dimension added
    if not s2:
        s2 = [1]
    return shape, list(p1), s2, list(draw(st.permutations(range(len(s2)))))


@given(chains())
def test_one_reshape_and_one_transpose_give_the_same_tensor(chain):
    shape, p1, s2, p2 = chain
    x = np.arange(int(np.prod(shape))).reshape(shape)
    want = np.transpose(np.transpose(x, p1).reshape(s2), p2)
    joined = _joined(shape, p1, s2, p2)
    if joined is not None:
        assert np.array_equal(np.transpose(x.reshape(joined[0]), joined[1]), want)
    else:  # only where every dimension is a unit (nothing to order)
        assert all(length == 1 for length in shape)


def test_a_model_loses_a_transpose_and_computes_the_same():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 3, 2]),
             helper.make_node("Reshape", ["t", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["y"], perm=[1, 2, 0, 3])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 1, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 8, 8])],
        [numpy_helper.from_array(np.array([8, 2, 4, 8], dtype=np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(0).standard_normal((2, 8, 1, 32)).astype(np.float32)

    def run(m):
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {"x": x})[0]

    want = run(model)
    join_in_model(model, {}, iter(["c0", "c1"]).__next__)
    onnx.checker.check_model(model, full_check=True)
    assert Counter(n.op_type for n in model.graph.node) == Counter(
        {"Reshape": 1, "Transpose": 1})
    np.testing.assert_array_equal(run(model), want)
