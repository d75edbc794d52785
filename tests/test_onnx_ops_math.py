"""ONNX logic, rounding, Mod and the trigonometric and hyperbolic functions against
onnxruntime (imported, executed, exported and run again)."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_cases import check_against_ort, node_model  # noqa: E402

RNG = np.random.default_rng(0)
X = np.concatenate([RNG.uniform(-3, 3, 20), [-2.5, -0.5, 0.5, 1.5, 2.5, 0.0]]).astype(np.float32)
UNIT = np.concatenate([RNG.uniform(-0.99, 0.99, 20), [-1.0, 1.0, 0.0]]).astype(np.float32)


@pytest.mark.parametrize("op, x", [
    ("Floor", X), ("Ceil", X), ("Round", X), ("Sin", X), ("Cos", X), ("Tan", UNIT),
    ("Atan", X), ("Asin", UNIT), ("Acos", UNIT), ("Sinh", X), ("Cosh", X), ("Asinh", X * 10),
    ("Acosh", np.abs(X) + 1.0), ("Atanh", UNIT[2:-3]),
])
def test_function_matches_onnxruntime(op, x):
    check_against_ort(node_model(op, {"x": x}), {"x": x}, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic_on_bools_with_broadcasting(op):
    a, b = RNG.random((3, 4)) > 0.5, RNG.random((4,)) > 0.5
    check_against_ort(node_model(op, {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
def test_bitwise_on_integers(op):
    a, b = RNG.integers(0, 255, (3, 4), dtype=np.int32), RNG.integers(0, 255, (4,), dtype=np.int32)
    check_against_ort(node_model(op, {"a": a, "b": b}, opset=18), {"a": a, "b": b}, export=False)


def test_not_isnan_isinf():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    check_against_ort(node_model("IsNaN", {"x": x}), {"x": x})
    for neg, pos in ((1, 1), (0, 1), (1, 0), (0, 0)):
        check_against_ort(node_model("IsInf", {"x": x}, detect_negative=neg, detect_positive=pos),
                          {"x": x})
    b = x > 0
    check_against_ort(node_model("Not", {"b": b}), {"b": b})


@pytest.mark.parametrize("fmod, dtype", [(0, np.int64), (1, np.int32), (1, np.float32)])
def test_mod_takes_the_sign_of_the_divisor_or_with_fmod_of_the_dividend(fmod, dtype):
    a = np.array([[-7, 7, -7, 7, 5, 0]], dtype)
    b = np.array([3, 3, -3, -3, 5, 2], dtype)
    check_against_ort(node_model("Mod", {"a": a, "b": b}, fmod=fmod), {"a": a, "b": b})


@pytest.mark.parametrize("bias, adds", [
    (np.zeros(4, np.float32), 0),  # an untrained layer's bias: no Add
    (np.zeros((2, 3, 4), np.float32), 1),  # zeros that broadcast x to more: still added
    (np.full(4, 0.5, np.float32), 1),
])
def test_adding_known_zeros_that_broadcast_nothing_is_no_add(bias, adds):
    import ngrules as ng

    x = RNG.standard_normal((3, 4)).astype(np.float32)
    outputs = check_against_ort(node_model("Add", {"x": x}, {"b": bias}), {"x": x})
    assert sum(n.op == "Add" for n in ng.toposort(outputs)) == adds
