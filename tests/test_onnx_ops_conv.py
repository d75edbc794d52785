"""Grouped and depthwise convolution (ONNX Conv's `group`) as the Convolution op's `groups`."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_cases import check_against_ort, node_model  # noqa: E402

import ngrules as ng  # noqa: E402


@pytest.mark.parametrize(
    "channels, out, group, kernel, attrs",
    [
        (4, 8, 2, (3, 3), {"pads": [1, 1, 1, 1]}),
        (6, 6, 6, (3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # depthwise
        (4, 8, 4, (3,), {"dilations": [2]}),  # depthwise, multiplier 2, 1-D
        (6, 3, 3, (2, 2), {"pads": [0, 1, 1, 0]}),  # asymmetric pads
        (4, 4, 4, (3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ],
)
def test_grouped_conv_is_one_convolution_and_matches_onnxruntime(channels, out, group, kernel,
                                                                 attrs):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, channels, *([7] * len(kernel)))).astype(np.float32)
    w = rng.standard_normal((out, channels // group, *kernel)).astype(np.float32)
    b = rng.standard_normal(out).astype(np.float32)
    m = node_model("Conv", {"x": x}, {"w": w, "b": b}, group=group, **attrs)
    outputs = check_against_ort(m, {"x": x})
    convs = [n for n in ng.toposort(outputs) if n.op == "Convolution"]
    assert len(convs) == 1 and convs[0].attrs["groups"] == group


@pytest.mark.parametrize("bias, adds", [(0.0, 0), (0.5, 1)])
def test_a_zero_bias_adds_nothing(bias, adds):
    """A Conv bias known to be all zeros (as the dynamo exporter writes for a layer without
    one) is left out; any other bias is added."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = np.full(4, bias, np.float32)
    outputs = check_against_ort(node_model("Conv", {"x": x}, {"w": w, "b": b}), {"x": x})
    assert sum(n.op == "Add" for n in ng.toposort(outputs)) == adds


def test_grouped_convolution_gradients_match_finite_differences():
    from test_autodiff import check_gradients, weighted_cost

    rng = np.random.default_rng(1)
    x = ng.placeholder({"C": 4, "D": 1, "H": 4, "W": 3, "N": 2}, np.float64, name="x")
    w = ng.placeholder({"J": 2, "T": 1, "R": 2, "S": 2, "K": 6}, np.float64, name="w")
    y = ng.make_node("Convolution", (x, w), groups=2, padding=[0, 1, 0],
                     axes=ng.make_axes({"K": 6, "M": 1, "P": 5, "Q": 2, "N": 2}))
    feeds = {p: rng.standard_normal(p.axes.lengths) for p in (x, w)}
    check_gradients(weighted_cost([y], 0), feeds, seed=2)


def test_groups_must_divide_the_channels():
    x = ng.placeholder({"C": 4, "D": 1, "H": 3, "W": 3, "N": 1}, name="x")
    w = ng.placeholder({"J": 2, "T": 1, "R": 1, "S": 1, "K": 3}, name="w")
    with pytest.raises(ng.OpError, match="groups"):
        ng.make_node("Convolution", (x, w), groups=2,
                     axes=ng.make_axes({"K": 3, "M": 1, "P": 3, "Q": 3, "N": 1}))


@pytest.mark.parametrize("group, kernel, attrs", [
    (1, (3, 3), {}),
    (1, (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
    (2, (2, 3), {"strides": [2, 1], "dilations": [1, 2], "pads": [0, 1, 1, 0]}),
    (4, (3,), {"strides": [3], "output_padding": [2]}),
    (1, (3, 3), {"strides": [2, 2], "output_shape": [10, 9], "auto_pad": "SAME_UPPER"}),
])
def test_conv_transpose_is_conv_bprop_data_and_matches_onnxruntime(group, kernel, attrs):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, *([5] * len(kernel)))).astype(np.float32)
    w = rng.standard_normal((4, 6 // group if group != 4 else 2, *kernel)).astype(np.float32)
    b = rng.standard_normal(w.shape[1] * group).astype(np.float32)
    m = node_model("ConvTranspose", {"x": x}, {"w": w, "b": b}, group=group, **attrs)
    outputs = check_against_ort(m, {"x": x})
    assert "ConvBpropData" in {n.op for n in ng.toposort(outputs)}


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[0, 2, 1, 0, 1, 2], [1, 0, -1, 1, 2, 0]])
def test_pad_modes(mode, pads):
    x = np.arange(2 * 4 * 5, dtype=np.float32).reshape(2, 4, 5)
    m = node_model("Pad", {"x": x}, {"p": np.array(pads, np.int64)}, opset=19, mode=mode)
    check_against_ort(m, {"x": x})
