"""ONNX Range, ConstantOfShape, EyeLike, Size, Trilu, OneHot, Tile, DepthToSpace,
SpaceToDepth, CumSum and Einsum against onnxruntime."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402
from onnx_cases import check_against_ort, node_model  # noqa: E402

import ngrules as ng  # noqa: E402

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def test_range_of_float_constants():
    inits = {k: np.array(v, np.float32) for k, v in (("s", 1.0), ("l", 4.2), ("d", 0.5))}
    check_against_ort(node_model("Range", {}, inits), {})


def test_constant_of_shape_and_eye_like_and_size():
    value = helper.make_tensor("v", 1, [1], [2.5])
    m = node_model("ConstantOfShape", {}, {"shape": np.array([2, 3], np.int64)}, value=value)
    check_against_ort(m, {})
    check_against_ort(node_model("EyeLike", {"x": X[0]}, k=1), {"x": X[0]})
    check_against_ort(node_model("Size", {"x": X}), {"x": X})


@pytest.mark.parametrize("upper, k", [(1, 0), (0, 0), (1, -1), (0, 2)])
def test_trilu(upper, k):
    m = node_model("Trilu", {"x": X}, {"k": np.array(k, np.int64)}, upper=upper)
    check_against_ort(m, {"x": X})


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_with_negative_indices_and_values(axis):
    i = np.array([[0, 2, -1], [1, -3, 0]], np.int64)
    inits = {"depth": np.array(4, np.int64), "values": np.array([-1.0, 3.0], np.float32)}
    check_against_ort(node_model("OneHot", {"i": i}, inits, axis=axis), {"i": i})


@pytest.mark.parametrize("repeats", [[1, 2, 1], [3, 1, 2], [1, 1, 1]])
def test_tile(repeats):
    m = node_model("Tile", {"x": X}, {"r": np.array(repeats, np.int64)})
    check_against_ort(m, {"x": X})


@pytest.mark.parametrize("op, mode", [("DepthToSpace", "DCR"), ("DepthToSpace", "CRD"),
                                      ("SpaceToDepth", None)])
def test_depth_and_space(op, mode):
    x = RNG.standard_normal((2, 8, 2, 4) if op == "DepthToSpace" else (2, 2, 4, 6)).astype(
        np.float32)
    attrs = {"blocksize": 2, **({"mode": mode} if mode else {})}
    check_against_ort(node_model(op, {"x": x}, **attrs), {"x": x})


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("axis", [0, 2])
def test_cumsum(exclusive, reverse, axis):
    m = node_model("CumSum", {"x": X}, {"a": np.array(axis, np.int64)}, exclusive=exclusive,
                   reverse=reverse)
    check_against_ort(m, {"x": X})


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,i", [(4,), (4,)]),
    ("ij,kj", [(3, 4), (5, 4)]),
    ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 2)]),
    ("ij,j->i", [(3, 4), (4,)]),
])
def test_einsum(equation, shapes):
    feeds = {f"x{i}": RNG.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    outputs = check_against_ort(node_model("Einsum", feeds, equation=equation), feeds)
    if equation == "ij,jk->ik":
        assert "Dot" in {n.op for n in ng.toposort(outputs)}


@pytest.mark.parametrize("attrs", [
    {"mode": "nearest"},
    {"mode": "linear"},
    {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
    {"mode": "cubic", "coordinate_transformation_mode": "asymmetric"},
    {"mode": "nearest", "nearest_mode": "floor", "coordinate_transformation_mode": "asymmetric"},
])
@pytest.mark.parametrize("scales", [[1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 0.5, 1.5]])
def test_resize_is_one_dot_per_resized_dimension(attrs, scales):
    x = RNG.standard_normal((1, 2, 4, 6)).astype(np.float32)
    inits = {"roi": np.array([], np.float32), "scales": np.array(scales, np.float32)}
    outputs = check_against_ort(node_model("Resize", {"x": x}, inits, **attrs), {"x": x})
    dots = [n for n in ng.toposort(outputs) if n.op == "Dot"]
    assert len(dots) == 2


@pytest.mark.parametrize("axis", [None, 1])
def test_compress_by_a_constant_condition(axis):
    condition = np.array([True, False, True, True])
    m = node_model("Compress", {"x": X}, {"c": condition},
                   **({"axis": axis} if axis is not None else {}))
    shape = [3] if axis is None else [2, 2, 4]  # what inference cannot tell, the model states
    out = m.graph.output[0].type.tensor_type
    out.ClearField("shape")
    for n in shape:
        out.shape.dim.add().dim_value = n
    check_against_ort(m, {"x": X})


def test_center_crop_pad():
    m = node_model("CenterCropPad", {"x": X}, {"s": np.array([5, 2], np.int64)}, opset=18,
                   axes=[1, 2])
    check_against_ort(m, {"x": X}, export=True)
