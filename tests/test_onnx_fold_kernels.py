"""The numpy kernels that fold shape computations at import without onnx's reference
evaluator (`importing/fold_kernels.py`, issue 34 item 6): each computes what the evaluator
computes (values, dtype, shape) on the cases shape computations meet (broadcasting, negative
indices and axes, integer division and modulo of negatives, Reshape's 0, Slice past the end and
backwards), and leaves to the evaluator what it does not cover."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from ngrules.interop.onnx.importing import fold_kernels  # noqa: E402

I64, F32 = np.int64, np.float32
BIG = np.iinfo(np.int64).max

CASES = [
    ("Add", [np.array([[1], [2]], I64), np.array([10, 20, 30], I64)], {}),
    ("Sub", [np.array([1.5, -2], np.float16), np.array([0.25], np.float16)], {}),
    ("Mul", [np.array(3, I64), np.array([2, -4], I64)], {}),
    ("Div", [np.array([-7, 7, -7, 7, 6], I64), np.array([2, -2, -2, 2, 3], I64)], {}),
    ("Div", [np.array([1, -3], np.int32), np.array([2, 2], np.int32)], {}),
    ("Div", [np.array([1.0, -3.0], F32), np.array([4.0, 0.5], F32)], {}),
    ("Mod", [np.array([-7, 7, 5], I64), np.array([3, -3, 5], I64)], {}),
    ("Mod", [np.array([-7, 7], I64), np.array([3, -3], I64)], {"fmod": 1}),
    ("Mod", [np.array([-7.5, 7.5], F32), np.array([2.0, -2.0], F32)], {"fmod": 1}),
    ("Equal", [np.array([1, 2, 3], I64), np.array([[2], [3]], I64)], {}),
    ("Less", [np.array([1, 2, 3], I64), np.array(2, I64)], {}),
    ("Greater", [np.array([1.0, np.nan], F32), np.array([0.0, 0.0], F32)], {}),
    ("LessOrEqual", [np.array([1, 2, 3], I64), np.array([2], I64)], {}),
    ("GreaterOrEqual", [np.array([1, 2, 3], I64), np.array([2], I64)], {}),
    ("And", [np.array([True, False, True]), np.array([True])], {}),
    ("Or", [np.array([[False], [True]]), np.array([False, False])], {}),
    ("Where", [np.array([True, False]), np.array([1, 2], I64), np.array([[7], [8]], I64)], {}),
    ("Cast", [np.array([1.7, -1.7, 0.0], F32)], {"to": TensorProto.INT32}),
    ("Cast", [np.array([0, 3], I64)], {"to": TensorProto.BOOL}),
    ("Cast", [np.array([True, False])], {"to": TensorProto.FLOAT16}),
    ("Concat", [np.array([1, 2], I64), np.array([-1], I64), np.array([], I64)], {"axis": -1}),
    ("Concat", [np.ones((1, 2), F32), np.zeros((2, 2), F32)], {"axis": 0}),
    ("Gather", [np.array([5, 6, 7], I64), np.array(-1, I64)], {}),
    ("Gather", [np.arange(12, dtype=I64).reshape(3, 4), np.array([[0, -1], [2, 1]], I64)],
     {"axis": 1}),
    ("Unsqueeze", [np.array([3, 4], I64), np.array([0, -1], I64)], {}),
    ("Unsqueeze", [np.array(3, I64), np.array([0], I64)], {}),
    ("Squeeze", [np.ones((1, 3, 1), I64), np.array([-1], I64)], {}),
    ("Squeeze", [np.ones((1, 3, 1), F32)], {}),
    ("Reshape", [np.arange(24, dtype=F32).reshape(2, 3, 4), np.array([0, -1], I64)], {}),
    ("Reshape", [np.zeros((0, 3), F32), np.array([3, 0], I64)], {"allowzero": 1}),
    ("Expand", [np.array([[1], [2], [3]], I64), np.array([2, 1, 4], I64)], {}),
    ("Expand", [np.array([True, False]), np.array([3, 1], I64)], {}),
    ("Slice", [np.arange(10, dtype=I64), np.array([-3], I64), np.array([BIG], I64)], {}),
    ("Slice", [np.arange(12, dtype=I64).reshape(3, 4), np.array([BIG, 1], I64),
               np.array([-BIG - 1, 3], I64), np.array([-2, -1], I64), np.array([-1, 2], I64)],
     {}),
    ("Slice", [np.arange(12, dtype=F32).reshape(3, 4), np.array([1], I64), np.array([3], I64),
               None, np.array([2], I64)], {}),
]


def _node(op, args, attrs):
    names = ["" if a is None else f"i{k}" for k, a in enumerate(args)]
    while names and not names[-1]:
        names.pop()
    return helper.make_node(op, names, ["out"], **attrs), {
        n: a for n, a in zip(names, args) if n}


def _reference(node, values, opset):
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), None)
           for n, v in values.items()]
    graph = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("out", 0, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, values)[0]


@pytest.mark.parametrize(("op", "args", "attrs"), CASES, ids=[c[0] for c in CASES])
def test_a_kernel_computes_what_onnxs_evaluator_computes(op, args, attrs):
    node, values = _node(op, args, attrs)
    (got,) = fold_kernels.run(node, 17, values)
    want = np.asarray(_reference(node, values, 17))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("op", "args", "attrs", "opset"), [
    ("Add", [np.array([1], I64), np.array([1], np.int32)], {}, 17),  # mixed types
    ("Cast", [np.array([1.5], F32)], {"to": TensorProto.STRING}, 17),
    ("Cast", [np.array([1.5], F32)], {"to": TensorProto.BFLOAT16}, 17),
    ("Unsqueeze", [np.array([3], I64)], {"axes": [0]}, 11),  # axes an attribute
    ("Slice", [np.arange(3, dtype=I64)], {"starts": [1], "ends": [2]}, 9),
    ("Where", [np.array([True]), np.array([1], I64), np.array([1.0], F32)], {}, 17),
    ("Range", [np.array(0, I64), np.array(3, I64), np.array(1, I64)], {}, 17),
])
def test_what_the_kernels_do_not_cover_goes_to_the_evaluator(op, args, attrs, opset):
    node, values = _node(op, args, attrs)
    assert fold_kernels.run(node, opset, values) is None
    other = helper.make_node(op, node.input, node.output, domain="com.example")
    assert fold_kernels.run(other, 17, values) is None
