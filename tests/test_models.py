"""Whole models built with the front end -- an MLP, a small CNN and a transformer block: forward
values against plain numpy, and every parameter's gradient against float64 differences."""

import numpy as np
from helpers import directional_difference

import ngrules as ng
from ngrules.ir import layers

F64 = np.float64


def _axes(**lengths):
    return ng.make_axes([ng.Axis(n, k) for n, k in lengths.items()])


def _params(rng, **shapes):
    """A placeholder and a random value for each named parameter (axes given as Axes)."""
    nodes = {k: ng.placeholder(ax, F64, name=k) for k, ax in shapes.items()}
    return nodes, {nodes[k]: rng.normal(size=ax.lengths) * 0.5 for k, ax in shapes.items()}


def _check_all_gradients(cost, feeds, seed):
    """deriv(cost, p) along a random direction equals the central difference, for every p."""
    program = ng.compile_graph([cost])
    grads = ng.execute([ng.deriv(cost, p) for p in feeds], feeds, ignore_unused=True)
    rng = np.random.default_rng(seed)
    for (p, value), grad in zip(feeds.items(), grads):
        assert grad.shape == value.shape, p.name
        direction = rng.normal(size=value.shape)
        fd = directional_difference(lambda v, p=p: program.run({**feeds, p: v})[0].item(), value,
                                    direction)  # fmt: skip
        np.testing.assert_allclose(np.sum(grad * direction), fd, rtol=1e-5, atol=1e-7,
                                   err_msg=p.name)  # fmt: skip


def test_mlp_forward_and_backward():
    rng = np.random.default_rng(0)
    h, k, n = ng.Axis("H", 5), ng.Axis("K", 3), ng.Axis("N", 3)
    p, feeds = _params(rng, x=_axes(F=4, N=3), w1=_axes(H=5, F=4), b1=_axes(H=5),
                       w2=_axes(K=3, H=5), b2=_axes(K=3))  # fmt: skip
    labels = ng.constant(np.eye(3)[:, [0, 2, 1]], [k, n], F64)
    hidden = ng.sigmoid(ng.dot(p["w1"], p["x"]) + p["b1"])
    logits = ng.dot(p["w2"], hidden) + p["b2"]
    cost = ng.sum(ng.cross_entropy_multi(ng.softmax(logits), labels), out_axes=())
    x, w1, b1, w2, b2 = (feeds[p[key]] for key in ("x", "w1", "b1", "w2", "b2"))
    hid = 1 / (1 + np.exp(-(w1 @ x + b1[:, None])))
    z = w2 @ hid + b2[:, None]
    logp = z - z.max(axis=0) - np.log(np.exp(z - z.max(axis=0)).sum(axis=0))
    want = -(logp * np.eye(3)[:, [0, 2, 1]]).sum()
    np.testing.assert_allclose(ng.execute([cost], feeds)[0], want, rtol=1e-12)
    assert hidden.axes == ng.make_axes([h, n]) and logits.axes == ng.make_axes([k, n])
    _check_all_gradients(cost, feeds, 1)


def test_cnn_forward_and_backward():
    """convolution -> batchnorm -> relu -> max pooling -> dot -> softmax cross-entropy."""
    rng = np.random.default_rng(2)
    p, feeds = _params(
        rng,
        x=_axes(C=2, D=1, H=4, W=4, N=2),
        w=_axes(C=2, T=1, R=3, S=3, K=3),
        gamma=_axes(K=3),
        beta=_axes(K=3),
        wd=_axes(O=2, K=3, M=1, P=2, Q=2),
    )
    conv = ng.convolution({"pad_h": 1, "pad_w": 1}, p["x"], p["w"])
    normed = layers.batchnorm(conv, p["gamma"], p["beta"])
    relu = ng.maximum(normed, 0.0)
    pooled = ng.pooling({"op": "max", "R": 2, "S": 2, "str_h": 2, "str_w": 2}, relu)
    logits = ng.dot(pooled, p["wd"])
    assert pooled.axes.names == ("K", "M", "P", "Q", "N") and logits.axes.names == ("N", "O")
    labels = ng.constant(np.eye(2), logits.axes, F64)
    probs = ng.softmax(logits, normalization_axes=logits.axes[1:])
    cost = ng.sum(ng.cross_entropy_multi(probs, labels, out_axes=logits.axes[:1]), out_axes=())
    assert np.isfinite(ng.execute([cost], feeds)[0])
    _check_all_gradients(cost, feeds, 3)


def test_transformer_block_forward_and_backward():
    """Pre-norm block: x + attention(layer_norm(x)), then + FFN with GELU (tanh form)."""
    rng = np.random.default_rng(4)
    e, t, n = 4, 3, 2
    p, feeds = _params(
        rng,
        x=_axes(E=e, T=t, N=n),
        g1=_axes(E=e),
        b1=_axes(E=e),
        wq=_axes(D=e, E=e),
        wk=_axes(D=e, E=e),
        wv=_axes(D=e, E=e),
        wo=_axes(E=e, D=e),
        g2=_axes(E=e),
        b2=_axes(E=e),
        w1=_axes(G=6, E=e),
        w2=_axes(E=e, G=6),
    )
    x = p["x"]
    feature = x.axes[:1]
    h = layers.layer_norm(x, p["g1"], p["b1"], feature)
    q = ng.dot(p["wq"], h)  # (D, T, N)
    k = ng.cast_axes(ng.dot(p["wk"], h), _axes(D=e, S=t, N=n))  # keys over their own axis S
    v = ng.cast_axes(ng.dot(p["wv"], h), _axes(D=e, S=t, N=n))
    scores = ng.sum(q * k, reduction_axes=q.axes[:1]) * (1.0 / np.sqrt(e))  # batched over N
    attn = ng.softmax(scores, normalization_axes=k.axes[1:2])
    mixed = ng.sum(attn * v, reduction_axes=k.axes[1:2])  # (T, N, D)
    y = x + ng.axes_with_order(ng.dot(p["wo"], mixed), x.axes)
    ffn = ng.dot(
        p["w2"], layers.gelu(ng.dot(p["w1"], layers.layer_norm(y, p["g2"], p["b2"], feature)))
    )
    out = y + ng.axes_with_order(ffn, x.axes)
    assert out.axes == x.axes
    weights = ng.constant(rng.normal(size=x.axes.lengths), x.axes, F64)
    cost = ng.sum(out * weights, out_axes=())
    (got,) = ng.execute([out], feeds)
    np.testing.assert_allclose(got, _numpy_block(feeds, p), rtol=1e-10)
    _check_all_gradients(cost, feeds, 5)


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
