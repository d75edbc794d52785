"""ONNX activations and normalisations (written from primitives) against onnxruntime."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_cases import check_against_ort, node_model  # noqa: E402

from ngrules.interop.onnx import OnnxError  # noqa: E402
from ngrules.interop.onnx.importer import from_onnx  # noqa: E402

RNG = np.random.default_rng(0)
X = RNG.uniform(-4, 4, (2, 6, 3, 4)).astype(np.float32)


@pytest.mark.parametrize("op, attrs, opset", [
    ("HardSwish", {}, 17), ("Selu", {}, 17), ("Selu", {"alpha": 2.0, "gamma": 0.5}, 17),
    ("Celu", {"alpha": 0.7}, 17), ("Mish", {}, 18), ("Softsign", {}, 17),
    ("ThresholdedRelu", {"alpha": 0.5}, 17), ("Shrink", {"lambd": 1.0, "bias": 0.3}, 17),
    ("Hardmax", {"axis": 1}, 17), ("Swish", {"alpha": 1.5}, 24),
])
def test_activation(op, attrs, opset):
    check_against_ort(node_model(op, {"x": X}, opset=opset, **attrs), {"x": X},
                      export=opset <= 18)


def test_prelu_with_a_per_channel_slope():
    slope = RNG.uniform(0, 1, (6, 1, 1)).astype(np.float32)
    check_against_ort(node_model("PRelu", {"x": X}, {"s": slope}), {"x": X})


def _affine(n):
    return {"scale": RNG.uniform(0.5, 1.5, n).astype(np.float32),
            "bias": RNG.standard_normal(n).astype(np.float32)}


def test_instance_normalization():
    check_against_ort(node_model("InstanceNormalization", {"x": X}, _affine(6)), {"x": X})


def test_group_normalization():
    m = node_model("GroupNormalization", {"x": X}, _affine(6), opset=21, num_groups=3)
    check_against_ort(m, {"x": X}, export=False)


def test_group_normalization_of_opset_18_is_refused_as_deprecated():
    """Its per-group scale was withdrawn in opset 21; onnx's checker refuses the old form."""
    m = node_model("GroupNormalization", {"x": X}, _affine(3), opset=18, num_groups=3)
    with pytest.raises(OnnxError, match="deprecated"):
        from_onnx(m)


def test_rms_normalization():
    scale = RNG.uniform(0.5, 1.5, (3, 4)).astype(np.float32)
    m = node_model("RMSNormalization", {"x": X}, {"s": scale}, opset=23, axis=-2)
    check_against_ort(m, {"x": X}, export=False)


@pytest.mark.parametrize("op, attrs", [
    ("MeanVarianceNormalization", {}), ("LpNormalization", {"axis": 1, "p": 1}),
    ("LpNormalization", {"p": 2}), ("GlobalLpPool", {"p": 3}), ("LRN", {"size": 3}),
    ("LRN", {"size": 5, "alpha": 0.01, "beta": 0.5, "bias": 2.0}), ("ReduceL1", {}),
])
def test_normalization(op, attrs):
    x = np.abs(X) + 0.1 if op == "GlobalLpPool" else X
    check_against_ort(node_model(op, {"x": x}, **attrs), {"x": x})


@pytest.mark.parametrize("op", ["SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"])
@pytest.mark.parametrize("reduction, weighted, ignore", [
    ("mean", False, None), ("mean", True, 2), ("sum", True, None), ("none", False, 0),
])
def test_losses(op, reduction, weighted, ignore):
    scores = RNG.standard_normal((3, 4, 2)).astype(np.float32)
    labels = np.array([[0, 2], [3, 1], [2, 2]], np.int64)
    inits = {"w": RNG.uniform(0.5, 2, 4).astype(np.float32)} if weighted else {}
    attrs = {"reduction": reduction, **({"ignore_index": ignore} if ignore is not None else {})}
    m = node_model(op, {"x": scores, "y": labels}, inits, opset=13, **attrs)
    check_against_ort(m, {"x": scores, "y": labels})


@pytest.mark.parametrize("axis, largest", [(-1, 1), (1, 0), (0, 1)])
def test_top_k_values_and_indices_with_ties_to_the_lower_index(axis, largest):
    x = np.round(RNG.standard_normal((4, 5, 3)), 0).astype(np.float32)  # many ties
    m = node_model("TopK", {"x": x}, {"k": np.array([2], np.int64)}, n_out=2, axis=axis,
                   largest=largest)
    check_against_ort(m, {"x": x})
