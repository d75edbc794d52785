"""ONNX Attention (opset 23) from primitives, against onnxruntime and exported back."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_cases import check_against_ort, node_model  # noqa: E402

import ngrules as ng  # noqa: E402

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("q_heads, kv_heads, attrs", [
    (2, 2, {}), (4, 2, {"is_causal": 1}), (2, 1, {"scale": 0.3, "softcap": 2.0}),
])
def test_four_dimensional_attention(q_heads, kv_heads, attrs):
    q = RNG.standard_normal((2, q_heads, 3, 4)).astype(np.float32)
    k = RNG.standard_normal((2, kv_heads, 5, 4)).astype(np.float32)
    v = RNG.standard_normal((2, kv_heads, 5, 6)).astype(np.float32)
    feeds = {"q": q, "k": k, "v": v}
    outputs = check_against_ort(node_model("Attention", feeds, opset=23, **attrs), feeds)
    assert "Softmax" in {n.op for n in ng.toposort(outputs)}


def test_three_dimensional_attention_with_a_bool_mask():
    q = RNG.standard_normal((2, 3, 8)).astype(np.float32)
    k = RNG.standard_normal((2, 5, 8)).astype(np.float32)
    v = RNG.standard_normal((2, 5, 8)).astype(np.float32)
    mask = RNG.random((3, 5)) > 0.3
    mask[:, 0] = True
    feeds = {"q": q, "k": k, "v": v, "m": mask}
    m = node_model("Attention", feeds, opset=23, q_num_heads=2, kv_num_heads=2)
    check_against_ort(m, feeds)
