"""Laws of the importer's shaping, on random shapes: Reshape is numpy's row-major reshape, and
elementwise ops broadcast as numpy does, whatever the naming makes of the dimensions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ngrules as ng

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F32 = TensorProto.FLOAT


def _model(nodes, inputs, output_shape, inits=()):
    graph = helper.make_graph(
        nodes, "p", [helper.make_tensor_value_info(n, F32, s) for n, s in inputs],
        [helper.make_tensor_value_info("y", F32, list(output_shape))], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@st.composite
def regroupings(draw):
    """A shape and another shape with the same number of elements."""
    factors = draw(st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=5))
    def cut(fs):
        shape, i = [], 0
        while i < len(fs):
            n = draw(st.integers(1, len(fs) - i))
            shape.append(int(np.prod(fs[i : i + n])))
            i += n
        return shape
    src = cut(factors)
    return src, cut(draw(st.permutations(factors)))


@settings(max_examples=40, deadline=None)
@given(regroupings())
def test_reshape_is_numpys_row_major_reshape(shapes):
    src, dst = shapes
    target = numpy_helper.from_array(np.array(dst, np.int64), "s")
    m = _model([helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", src)], dst, [target])
    (y,) = ng.from_onnx(m)
    x = np.arange(np.prod(src), dtype=np.float32).reshape(src)
    np.testing.assert_array_equal(ng.execute([y], {"x": x})[0], x.reshape(dst))


@st.composite
def broadcastable(draw):
    """Two shapes numpy broadcasts together (each dimension equal or 1, ranks may differ)."""
    out = draw(st.lists(st.integers(1, 3), min_size=0, max_size=4))
    def side():
        rank = draw(st.integers(0, len(out)))
        return [d if draw(st.booleans()) else 1 for d in out[len(out) - rank :]]
    return side(), side()


@settings(max_examples=40, deadline=None)
@given(broadcastable(), st.sampled_from(["Add", "Sub", "Mul", "Max"]))
def test_elementwise_ops_broadcast_as_numpy(shapes, op):
    a_shape, b_shape = shapes
    out = list(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    m = _model([helper.make_node(op, ["a", "b"], ["y"])], [("a", a_shape), ("b", b_shape)], out)
    (y,) = ng.from_onnx(m)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    want = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Max": np.maximum}[op](a, b)
    np.testing.assert_allclose(ng.execute([y], {"a": a, "b": b})[0], want, rtol=1e-6)
