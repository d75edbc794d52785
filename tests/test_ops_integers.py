"""BitShift and TruncDivide against closed forms: C's division toward zero, shifts that wrap,
and the shifts ONNX defines outside [0, bits)."""

import numpy as np
import pytest

import ngrules as ng


def _run(op, x, y, **attrs):
    a = ng.placeholder({"A": len(x)}, x.dtype, name="a")
    b = ng.placeholder({"A": len(y)}, y.dtype, name="b")
    (out,) = ng.execute([ng.make_node(op, (a, b), **attrs)], {a: x, b: y})
    assert out.dtype == x.dtype
    return out.tolist()


def test_trunc_divide_rounds_toward_zero_and_gives_zero_for_a_zero_divisor():
    x = np.array([7, -7, 7, -7, 5, -128], np.int8)
    y = np.array([2, 2, -2, -2, 0, -1], np.int8)
    assert _run("TruncDivide", x, y) == [3, -3, -3, 3, 0, -128]  # -128 / -1 wraps, as in C
    f = np.array([7.5, -7.5], np.float64)
    assert _run("TruncDivide", f, np.array([2.0, 2.0])) == [3.0, -3.0]


def test_bit_shift_wraps_left_and_keeps_the_sign_right():
    x = np.array([-7, 100, 3, -128, 1], np.int8)
    y = np.array([1, 2, 9, -1, 7], np.int8)
    assert _run("BitShift", x, y, direction="left") == [-14, -112, 0, 0, -128]
    assert _run("BitShift", x, y, direction="right") == [-4, 25, 0, -1, 0]
    u = np.array([255, 1], np.uint32)
    assert _run("BitShift", u, np.array([31, 32], np.uint32), direction="left") == [2**31, 0]


@pytest.mark.parametrize("op, attrs", [("BitShift", {"direction": "left"}), ("TruncDivide", {})])
def test_integer_ops_refuse_what_they_do_not_define(op, attrs):
    f = ng.placeholder({"A": 2}, np.float32, name="f")
    i = ng.placeholder({"A": 2}, np.int32, name="i")
    with pytest.raises(ng.OpError, match="mix dtypes"):
        ng.make_node(op, (f, i), **attrs)
    with pytest.raises(ng.OpError, match="direction"):
        ng.make_node("BitShift", (i, i), direction="up")
    with pytest.raises(ng.OpError, match="integer operands"):
        ng.make_node("BitShift", (f, f), direction="left")


def test_bit_cast_reads_the_same_bits_and_refuses_another_width():
    x = ng.placeholder({"A": 2}, np.float32, name="x")
    values = np.array([1.0, -2.5], np.float32)
    (out,) = ng.execute([ng.make_node("BitCast", (x,), dtype=np.int32)], {x: values})
    assert out.tolist() == [0x3F800000, -0x3FE00000]  # IEEE 754: 1.0 and -2.5
    with pytest.raises(ng.OpError, match="widths must agree"):
        ng.make_node("BitCast", (x,), dtype=np.int64)
