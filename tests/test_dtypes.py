"""Integer, unsigned, bool and float16 tensors: every op numpy computes in the operands' dtype
runs in it (kernel dtype = inferred dtype, values = numpy's); ops whose numpy result would be a
float of another width refuse integers with an OpError."""

import numpy as np
import pytest
from helpers import Leaves, numpy_eval, single_outputs
from hypothesis import given, settings
from hypothesis import strategies as st

import ngrules as ng
from ngrules.ir.graph import toposort

SAME_DTYPE_OPS = [
    "Add", "Subtract", "Multiply", "Maximum", "Minimum", "Negative", "Square", "Absolute",
    "Sign", "Equal", "NotEqual", "Greater", "Less", "GreaterEqual", "LessEqual", "Select",
    "Cast", "Sum", "Max", "Min", "Prod", "Argmax", "Argmin", "Dot", "DotLowDimension",
    "Broadcast", "ReorderAxes", "Transpose", "Flatten", "Unflatten", "Concat", "Slice",
    "TensorSlice", "Unslice", "Pad", "ExpandDims", "AxesCast", "OneHot", "Convolution",
    "ConvBpropData", "ConvUpdate",
]  # fmt: skip
FLOAT_ONLY_OPS = ["Divide", "Power", "Reciprocal", "Sqrt", "Exp", "Log", "Tanh", "Sigmoid", "Erf"]
DTYPES = [np.int8, np.int32, np.int64, np.uint8, np.float16]


def _feeds(outputs, dtype, seed):
    """Small values (|v| <= 1 for integers, so products and sums stay in range)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for node in toposort(outputs):
        if node.op == "Placeholder":
            low = 0 if np.dtype(dtype).kind == "u" else -1
            raw = rng.integers(low, 2, node.axes.lengths) if np.dtype(dtype).kind in "iu" else (
                rng.uniform(-2, 2, node.axes.lengths))  # fmt: skip
            feeds[node] = np.asarray(raw).astype(node.dtype)
    return feeds


@pytest.mark.parametrize("name", SAME_DTYPE_OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_op_runs_in_integer_and_float16_dtypes(name, dtype, data):
    node = ng.OPS[name].gen(data.draw, Leaves(dtype))
    outputs = single_outputs(node)
    feeds = _feeds(outputs, dtype, data.draw(st.integers(0, 2**16)))
    arrays = ng.execute(outputs, feeds)
    for out, got, want in zip(outputs, arrays, numpy_eval(outputs, feeds)):
        assert got.dtype == out.dtype and got.shape == out.axes.lengths
        if out.dtype.kind == "f" and out.dtype.itemsize == 2:
            np.testing.assert_allclose(got.astype(float), want, rtol=2e-2, atol=5e-2)
        elif out.dtype.kind in "iub":
            want = np.asarray(want).astype(out.dtype)  # numpy's wrap-around, as the kernel
            np.testing.assert_array_equal(got, want)


def test_leaves_keep_their_dtype_and_reject_unknown_ones():
    for dtype in (np.bool_, np.int16, np.uint32, np.float16):
        assert ng.placeholder({"A": 2}, dtype).dtype == dtype
    with pytest.raises(ng.OpError, match="not supported"):
        ng.placeholder({"A": 2}, np.complex64)


@pytest.mark.parametrize("name", FLOAT_ONLY_OPS)
def test_float_only_ops_refuse_integers(name):
    x = ng.placeholder({"A": 2}, np.int32, name="x")
    with pytest.raises(ng.OpError, match="float"):
        ng.make_node(name, (x,) * ng.OPS[name].arity)


def test_bool_masks_promote_and_bool_sums_need_a_cast():
    x = ng.placeholder({"A": 3}, np.int32, name="x")
    mask = ng.greater(x, 0)
    assert mask.dtype == np.bool_ and (x * mask).dtype == np.int32
    with pytest.raises(ng.OpError, match="bool operands only"):
        ng.make_node("Add", (mask, mask))
    with pytest.raises(ng.OpError, match="cast it first"):
        ng.sum(mask, out_axes=())
    (count,) = ng.execute(
        [ng.sum(ng.cast(mask, np.int32), out_axes=())], {x: np.array([3, -1, 2], np.int32)}
    )
    assert count == 2 and count.dtype == np.int32
