"""Three models built with the front end (an MLP, a small CNN, a transformer block), shared by
test_models.py (values against numpy, gradients against differences) and test_models_nn.py
(what the rule library fuses in them).

`primitives=True` writes sigmoid and softmax from primitives (`ngrules.ir.layers`), as a user of
an older front end would, so the library's fusion rules have something to find; layer norm,
GELU, batchnorm and relu are always primitives (there are no such front-end ops).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from helpers import directional_difference

import ngrules as ng
from ngrules.ir import layers

F64 = np.float64


def axes_of(**lengths):
    return ng.make_axes([ng.Axis(n, k) for n, k in lengths.items()])


def params(rng, **shapes):
    """A placeholder and a random value for each named parameter (axes given as Axes)."""
    nodes = {k: ng.placeholder(ax, F64, name=k) for k, ax in shapes.items()}
    return nodes, {nodes[k]: rng.normal(size=ax.lengths) * 0.5 for k, ax in shapes.items()}


@dataclass
class Model:
    cost: ng.Node
    feeds: dict
    p: dict = field(default_factory=dict)  # the parameter placeholders, by name
    parts: dict = field(default_factory=dict)  # named intermediate nodes

    def outputs(self) -> list:
        """The cost and its gradient by every parameter (what a training step runs)."""
        return [self.cost, *(ng.deriv(self.cost, node) for node in self.feeds)]


def check_all_gradients(cost, feeds, seed):
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


def _activations(primitives: bool):
    if primitives:
        return layers.sigmoid, layers.softmax
    return ng.sigmoid, lambda x, axes: ng.softmax(x, normalization_axes=axes)


def mlp(primitives: bool = False) -> Model:
    """dense -> sigmoid -> dense -> softmax -> cross-entropy."""
    sigmoid, softmax = _activations(primitives)
    rng = np.random.default_rng(0)
    k, n = ng.Axis("K", 3), ng.Axis("N", 3)
    p, feeds = params(rng, x=axes_of(F=4, N=3), w1=axes_of(H=5, F=4), b1=axes_of(H=5),
                      w2=axes_of(K=3, H=5), b2=axes_of(K=3))  # fmt: skip
    labels = ng.constant(np.eye(3)[:, [0, 2, 1]], [k, n], F64)
    hidden = sigmoid(ng.dot(p["w1"], p["x"]) + p["b1"])
    logits = ng.dot(p["w2"], hidden) + p["b2"]
    probs = softmax(logits, logits.axes[:1])
    cost = ng.sum(ng.cross_entropy_multi(probs, labels), out_axes=())
    return Model(cost, feeds, p, {"hidden": hidden, "logits": logits, "labels": labels})


def cnn(primitives: bool = False, inference: bool = False) -> Model:
    """convolution -> batchnorm -> relu -> max pooling -> dot -> softmax cross-entropy; with
    `inference`, batchnorm uses stored statistics (constants) instead of the batch's."""
    _, softmax = _activations(primitives)
    rng = np.random.default_rng(2)
    p, feeds = params(
        rng,
        x=axes_of(C=2, D=1, H=4, W=4, N=2),
        w=axes_of(C=2, T=1, R=3, S=3, K=3),
        gamma=axes_of(K=3),
        beta=axes_of(K=3),
        wd=axes_of(O=2, K=3, M=1, P=2, Q=2),
    )
    conv = ng.convolution({"pad_h": 1, "pad_w": 1}, p["x"], p["w"])
    if inference:
        mean = ng.constant([0.1, -0.2, 0.3], p["gamma"].axes, F64)
        var = ng.constant([1.0, 0.5, 2.0], p["gamma"].axes, F64)
        normed = layers.batchnorm_inference(conv, p["gamma"], p["beta"], mean, var)
    else:
        normed = layers.batchnorm(conv, p["gamma"], p["beta"])
    relu = ng.maximum(normed, 0.0)
    pooled = ng.pooling({"op": "max", "R": 2, "S": 2, "str_h": 2, "str_w": 2}, relu)
    logits = ng.dot(pooled, p["wd"])
    labels = ng.constant(np.eye(2), logits.axes, F64)
    probs = softmax(logits, logits.axes[1:])
    cost = ng.sum(ng.cross_entropy_multi(probs, labels, out_axes=logits.axes[:1]), out_axes=())
    return Model(cost, feeds, p, {"pooled": pooled, "logits": logits})


def transformer_block(primitives: bool = False) -> Model:
    """Pre-norm block: x + attention(layer_norm(x)), then + FFN with GELU (tanh form)."""
    _, softmax = _activations(primitives)
    rng = np.random.default_rng(4)
    e, t, n = 4, 3, 2
    p, feeds = params(
        rng,
        x=axes_of(E=e, T=t, N=n),
        g1=axes_of(E=e),
        b1=axes_of(E=e),
        wq=axes_of(D=e, E=e),
        wk=axes_of(D=e, E=e),
        wv=axes_of(D=e, E=e),
        wo=axes_of(E=e, D=e),
        g2=axes_of(E=e),
        b2=axes_of(E=e),
        w1=axes_of(G=6, E=e),
        w2=axes_of(E=e, G=6),
    )
    x = p["x"]
    feature = x.axes[:1]
    h = layers.layer_norm(x, p["g1"], p["b1"], feature)
    q = ng.dot(p["wq"], h)  # (D, T, N)
    k = ng.cast_axes(ng.dot(p["wk"], h), axes_of(D=e, S=t, N=n))  # keys over their own axis S
    v = ng.cast_axes(ng.dot(p["wv"], h), axes_of(D=e, S=t, N=n))
    scores = ng.sum(q * k, reduction_axes=q.axes[:1]) * (1.0 / np.sqrt(e))  # batched over N
    attn = softmax(scores, k.axes[1:2])
    mixed = ng.sum(attn * v, reduction_axes=k.axes[1:2])  # (T, N, D)
    y = x + ng.axes_with_order(ng.dot(p["wo"], mixed), x.axes)
    ffn = ng.dot(
        p["w2"], layers.gelu(ng.dot(p["w1"], layers.layer_norm(y, p["g2"], p["b2"], feature)))
    )
    out = y + ng.axes_with_order(ffn, x.axes)
    weights = ng.constant(rng.normal(size=x.axes.lengths), x.axes, F64)
    cost = ng.sum(out * weights, out_axes=())
    return Model(cost, feeds, p, {"out": out})
