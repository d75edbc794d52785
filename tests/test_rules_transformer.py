"""rules/nn.rules, pass transformer_fusion: what torch's exporters write for GELU, bias + GELU,
skip + layer norm and scaled-dot-product attention, built with the front end in the shapes
the ONNX importer gives them, fused into one op each with the values kept (numpy)."""

import math
from collections import Counter

import numpy as np
import pytest

import ngrules as ng
from ngrules.ir import layers as L

B, S, T = ng.make_axis(2, "B"), ng.make_axis(3, "S"), ng.make_axis(4, "T")
D, E, F = ng.make_axis(5, "D"), ng.make_axis(6, "E"), ng.make_axis(7, "F")
SQRT2 = 1.4142135623730951


@pytest.fixture(scope="module")
def library():
    return ng.load_library()


def _fuse(outputs, library):
    res = ng.rewrite(outputs, library, pipeline="fuse_nn")
    assert res.stop == "fixpoint"
    return res


def _ops(outputs) -> Counter:
    return Counter(n.op for n in ng.toposort(outputs))


def _erf_gelu(x: np.ndarray) -> np.ndarray:
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / SQRT2))


def _feeds(placeholders, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return {p: rng.standard_normal(p.axes.lengths).astype(dtype) for p in placeholders}


# -- GELU in torch's erf form -------------------------------------------------------------------
def _legacy(x):  # torch's legacy exporter: Div, Erf, Add, Mul(x, .), Mul(., 0.5)
    return x * (ng.erf(x / SQRT2) + 1.0) * 0.5


def _dynamo(x):  # torch's dynamo exporter: Div, Erf, Add, Mul(0.5, .), Mul(x, .)
    return x * (0.5 * (ng.erf(x / SQRT2) + 1.0))


@pytest.mark.parametrize(
    "form, rule",
    [(_legacy, "gelu_erf"), (_dynamo, "gelu_erf_half_inside"), (L.gelu_erf, "gelu_erf_scaled")],
    ids=["legacy", "dynamo", "definition"],
)
def test_each_erf_gelu_form_becomes_one_op_with_its_values(form, rule, library):
    x = ng.placeholder([B, F], np.float64, name="x")
    y = form(x)
    res = _fuse([y], library)
    assert res.fired()[rule] == 1
    assert _ops(res.outputs)["GeluErf"] == 1 and _ops(res.outputs)["Erf"] == 0
    feeds = _feeds([x])
    want = _erf_gelu(feeds[x])
    np.testing.assert_allclose(ng.execute(res.outputs, feeds)[0], want, rtol=1e-12)
    np.testing.assert_allclose(ng.execute([y], feeds)[0], want, rtol=1e-12)


def test_the_tanh_form_stays_gelu_and_a_wrong_constant_is_left_alone(library):
    x = ng.placeholder([B, F], np.float64, name="x")
    tanh_form = _ops(_fuse([L.gelu(x)], library).outputs)
    assert tanh_form["Gelu"] == 1 and tanh_form["GeluErf"] == 0
    wrong = x * (ng.erf(x / 1.5) + 1.0) * 0.5
    assert "GeluErf" not in _ops(_fuse([wrong], library).outputs)


def test_a_linear_layer_bias_joins_its_gelu(library):
    """The importer's Gemm: Dot(w, x) reordered, plus the bias broadcast over the batch."""
    x = ng.placeholder([B, D], np.float64, name="x")
    w = ng.placeholder([F, D], np.float64, name="w")
    b = ng.placeholder([F], np.float64, name="b")
    h = ng.axes_with_order(ng.dot(w, x), [B, F]) + ng.broadcast(b, [B, F])
    res = _fuse([_dynamo(h)], library)
    assert res.fired()["bias_gelu_erf"] == 1
    assert _ops(res.outputs)["BiasGeluErf"] == 1
    feeds = _feeds([x, w, b])
    want = _erf_gelu(feeds[x] @ feeds[w].T + feeds[b])
    np.testing.assert_allclose(ng.execute(res.outputs, feeds)[0], want, rtol=1e-12)


# -- skip + layer norm --------------------------------------------------------------------------
def test_a_layer_norm_of_a_residual_sum_is_one_op(library):
    x = ng.placeholder([B, S, F], np.float64, name="x")
    skip = ng.placeholder([B, S, F], np.float64, name="skip")
    gamma, beta = (ng.placeholder([F], np.float64, name=n) for n in ("gamma", "beta"))
    y = L.layer_norm(x + skip, gamma, beta, [F])
    res = _fuse([y], library)
    assert res.fired()["layer_norm"] == 1 and res.fired()["skip_layer_norm"] == 1
    ops = _ops(res.outputs)
    assert ops["SkipLayerNorm"] == 1 and ops["LayerNorm"] == 0
    feeds = _feeds([x, skip, gamma, beta])
    h = feeds[x] + feeds[skip]
    mean, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
    want = feeds[gamma] * (h - mean) / np.sqrt(var + 1e-5) + feeds[beta]
    np.testing.assert_allclose(ng.execute(res.outputs, feeds)[0], want, rtol=1e-10)


def test_the_normalised_axes_are_the_layer_norms_not_gammas(library):
    """gamma over [S, F], normalised over F only: the fused op keeps F (a wrong rule would
    normalise over gamma's axes)."""
    x = ng.placeholder([B, S, F], np.float64, name="x")
    skip = ng.placeholder([B, S, F], np.float64, name="skip")
    gamma, beta = (ng.placeholder([S, F], np.float64, name=n) for n in ("gamma", "beta"))
    ln = ng.make_node("LayerNorm", (x + skip, gamma, beta), axes=ng.make_axes([F]), eps=1e-5)
    res = _fuse([ln], library)
    (fused,) = [n for n in ng.toposort(res.outputs) if n.op == "SkipLayerNorm"]
    assert fused.attrs["axes"] == ng.make_axes([F])
    feeds = _feeds([x, skip, gamma, beta])
    np.testing.assert_allclose(
        ng.execute(res.outputs, feeds)[0], ng.execute([ln], feeds)[0], rtol=1e-12
    )


# -- scaled-dot-product attention ---------------------------------------------------------------
def _attention(q, k, v, scale=None, divide=None, mask=None):
    """As the importer writes batched MatMuls: sums of broadcast products around a Softmax."""
    qk = [B, S, T, D]
    scores = ng.sum(ng.broadcast(q, qk) * ng.broadcast(k, qk), reduction_axes=[D])
    if scale is not None:
        scores = scores * scale
    if divide is not None:
        scores = scores / divide
    if mask is not None:
        scores = scores + mask
    p = ng.softmax(scores, normalization_axes=[T])
    pv = [B, S, T, E]
    return ng.sum(ng.broadcast(p, pv) * ng.broadcast(v, pv), reduction_axes=[T])


def _numpy_attention(q, k, v, scale=1.0, mask=0.0):
    scores = np.einsum("bsd,btd->bst", q, k) * scale + mask
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bst,bte->bse", p, v)


@pytest.mark.parametrize(
    "kwargs, rule, scale",
    [
        ({}, "dot_product_attention", 1.0),
        ({"scale": 0.25}, "dot_product_attention_scaled", 0.25),
        ({"divide": 4.0}, "dot_product_attention_divided", 0.25),
    ],
    ids=["prescaled", "scaled", "divided"],
)
def test_attention_becomes_one_op_with_its_values(kwargs, rule, scale, library):
    q = ng.placeholder([B, S, D], np.float64, name="q")
    k = ng.placeholder([B, T, D], np.float64, name="k")
    v = ng.placeholder([B, T, E], np.float64, name="v")
    res = _fuse([_attention(q, k, v, **kwargs)], library)
    assert res.fired()[rule] == 1
    ops = _ops(res.outputs)
    assert ops["DotProductAttention"] == 1 and ops["Softmax"] == 0
    feeds = _feeds([q, k, v])
    want = _numpy_attention(feeds[q], feeds[k], feeds[v], scale)
    got = ng.execute(res.outputs, feeds)[0]
    assert res.outputs[0].axes.names == ("B", "S", "E")
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize(
    "kwargs, rule",
    [({"scale": 0.5}, "masked_dot_product_attention_scaled"),
     ({"divide": 2.0}, "masked_dot_product_attention_divided")],
    ids=["scaled", "divided"],
)
def test_masked_attention_becomes_one_op_with_its_values(kwargs, rule, library):
    q = ng.placeholder([B, S, D], np.float64, name="q")
    k = ng.placeholder([B, T, D], np.float64, name="k")
    v = ng.placeholder([B, T, E], np.float64, name="v")
    mask = ng.placeholder([B, S, T], np.float64, name="mask")
    res = _fuse([_attention(q, k, v, mask=mask, **kwargs)], library)
    assert res.fired()[rule] == 1
    assert _ops(res.outputs)["MaskedDotProductAttention"] == 1
    feeds = _feeds([q, k, v])
    feeds[mask] = np.where(np.arange(T.length) >= 3, -1e9, 0.0) * np.ones(mask.axes.lengths)
    want = _numpy_attention(feeds[q], feeds[k], feeds[v], 0.5, feeds[mask])
    np.testing.assert_allclose(ng.execute(res.outputs, feeds)[0], want, rtol=1e-10)


def test_a_softmax_over_another_axis_is_not_attention(library):
    """softmax over the query axis S, summed over T: the op normalises over what the softmax
    did, so the fused graph still agrees."""
    q = ng.placeholder([B, S, D], np.float64, name="q")
    k = ng.placeholder([B, T, D], np.float64, name="k")
    v = ng.placeholder([B, T, E], np.float64, name="v")
    qk = [B, S, T, D]
    scores = ng.sum(ng.broadcast(q, qk) * ng.broadcast(k, qk), reduction_axes=[D])
    p = ng.softmax(scores, normalization_axes=[S])
    pv = [B, S, T, E]
    y = ng.sum(ng.broadcast(p, pv) * ng.broadcast(v, pv), reduction_axes=[T])
    res = _fuse([y], library)
    feeds = _feeds([q, k, v])
    np.testing.assert_allclose(
        ng.execute(res.outputs, feeds)[0], ng.execute([y], feeds)[0], rtol=1e-10
    )


# -- the fused ops export (through their declared bodies) and run in onnxruntime -----------------
def test_the_fused_ops_export_and_agree_with_onnxruntime(library):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    q = ng.placeholder([B, S, D], np.float32, name="q")
    k = ng.placeholder([B, T, D], np.float32, name="k")
    v = ng.placeholder([B, T, D], np.float32, name="v")
    gamma, beta = (ng.placeholder([D], np.float32, name=n) for n in ("gamma", "beta"))
    qk = [B, S, T, D]
    scores = ng.sum(ng.broadcast(q, qk) * ng.broadcast(k, qk), reduction_axes=[D]) / 2.0
    p = ng.softmax(scores, normalization_axes=[T])
    pv = [B, S, T, D]
    att = ng.sum(ng.broadcast(p, pv) * ng.broadcast(v, pv), reduction_axes=[T])
    y = _dynamo(L.layer_norm(att + q, gamma, beta, [D]))
    res = _fuse([y], library)
    ops = _ops(res.outputs)
    assert ops["DotProductAttention"] == ops["SkipLayerNorm"] == ops["GeluErf"] == 1
    model = ng.to_onnx(res.outputs, output_names=["y"])
    onnx.checker.check_model(model, full_check=True)
    feeds = _feeds([q, k, v, gamma, beta], dtype=np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {p.attrs["name"]: a for p, a in feeds.items()})[0]
    np.testing.assert_allclose(got, ng.execute([y], feeds)[0], rtol=1e-4, atol=1e-5)
