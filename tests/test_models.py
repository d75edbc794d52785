"""Whole models built with the front end -- an MLP, a small CNN and a transformer block: forward
values against plain numpy, and every parameter's gradient against float64 differences."""

import numpy as np
from models import check_all_gradients, cnn, mlp, transformer_block

import ngrules as ng


def test_mlp_forward_and_backward():
    model = mlp()
    p, feeds, cost = model.p, model.feeds, model.cost
    h, k, n = ng.Axis("H", 5), ng.Axis("K", 3), ng.Axis("N", 3)
    x, w1, b1, w2, b2 = (feeds[p[key]] for key in ("x", "w1", "b1", "w2", "b2"))
    hid = 1 / (1 + np.exp(-(w1 @ x + b1[:, None])))
    z = w2 @ hid + b2[:, None]
    logp = z - z.max(axis=0) - np.log(np.exp(z - z.max(axis=0)).sum(axis=0))
    want = -(logp * np.eye(3)[:, [0, 2, 1]]).sum()
    np.testing.assert_allclose(ng.execute([cost], feeds)[0], want, rtol=1e-12)
    assert model.parts["hidden"].axes == ng.make_axes([h, n])
    assert model.parts["logits"].axes == ng.make_axes([k, n])
    check_all_gradients(cost, feeds, 1)


def test_cnn_forward_and_backward():
    """convolution -> batchnorm -> relu -> max pooling -> dot -> softmax cross-entropy."""
    model = cnn()
    pooled, logits = model.parts["pooled"], model.parts["logits"]
    assert pooled.axes.names == ("K", "M", "P", "Q", "N") and logits.axes.names == ("N", "O")
    assert np.isfinite(ng.execute([model.cost], model.feeds)[0])
    check_all_gradients(model.cost, model.feeds, 3)


def test_transformer_block_forward_and_backward():
    """Pre-norm block: x + attention(layer_norm(x)), then + FFN with GELU (tanh form)."""
    model = transformer_block()
    out, x = model.parts["out"], model.p["x"]
    assert out.axes == x.axes
    (got,) = ng.execute([out], model.feeds)
    np.testing.assert_allclose(got, _numpy_block(model.feeds, model.p), rtol=1e-10)
    check_all_gradients(model.cost, model.feeds, 5)


def _numpy_block(feeds, p):
    """The same block in plain numpy, arrays laid out (E, T, N)."""
    v = {k: feeds[node] for k, node in p.items()}

    def ln(a, g, b):
        mu, var = a.mean(axis=0), a.var(axis=0)
        return g[:, None, None] * (a - mu) / np.sqrt(var + 1e-5) + b[:, None, None]

    def gelu(a):
        return 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a**3)))

    h = ln(v["x"], v["g1"], v["b1"])
    q, k, val = (np.einsum("de,etn->dtn", v[w], h) for w in ("wq", "wk", "wv"))
    s = np.einsum("dtn,dsn->tns", q, k) / np.sqrt(q.shape[0])
    a = np.exp(s - s.max(axis=2, keepdims=True))
    a /= a.sum(axis=2, keepdims=True)
    mixed = np.einsum("tns,dsn->dtn", a, val)
    y = v["x"] + np.einsum("ed,dtn->etn", v["wo"], mixed)
    f = np.einsum(
        "eg,gtn->etn", v["w2"], gelu(np.einsum("ge,etn->gtn", v["w1"], ln(y, v["g2"], v["b2"])))
    )
    return y + f
