"""Small networks built with the front end from neon-style layers (`ngrules.ir.layers`): what
the rule library's `fuse_nn` and `inference` pipelines are written for. Each builder gives the
scalar cost, the nodes to differentiate it by, and feeds for every placeholder and variable."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import ngrules as ng
from ngrules.ir import layers as L


@dataclass
class Model:
    cost: ng.Node
    params: list[ng.Node]
    feeds: dict[ng.Node, np.ndarray]

    def outputs(self) -> list[ng.Node]:
        """The cost and its gradient by every parameter (what a training step runs)."""
        return [self.cost, *(ng.deriv(self.cost, p) for p in self.params)]


def _leaves(rng, **shapes):
    """float64 variables with random values, by name -> axes."""
    nodes, feeds = {}, {}
    for name, axes in shapes.items():
        node = ng.variable(axes, np.float64, name=name)
        nodes[name] = node
        feeds[node] = rng.normal(scale=0.5, size=node.axes.lengths)
    return nodes, feeds


def mlp(seed: int = 0) -> Model:
    """dense -> batchnorm -> leaky relu -> dense -> sigmoid -> dense -> softmax -> cross-entropy."""
    rng = np.random.default_rng(seed)
    C, H, G, K, N = (
        ng.make_axis(n, a) for n, a in ((4, "C"), (5, "H"), (5, "G"), (3, "K"), (6, "N"))
    )
    p, feeds = _leaves(rng, w1=[H, C], g1=[H], b1=[H], w2=[G, H], w3=[K, G])
    x = ng.placeholder([C, N], np.float64, name="x")
    t = ng.placeholder([K, N], np.float64, name="t")
    h = L.leaky_relu(L.batchnorm(ng.dot(p["w1"], x), p["g1"], p["b1"]), 0.1)
    h = L.sigmoid(ng.dot(p["w2"], h))
    y = L.softmax(ng.dot(p["w3"], h), [K])
    cost = ng.sum(ng.cross_entropy_multi(y, t), out_axes=())
    feeds[x] = rng.normal(size=(4, 6))
    feeds[t] = np.eye(3)[rng.integers(0, 3, size=6)].T.copy()
    return Model(cost, [p["w1"], p["g1"], p["b1"], p["w2"], x], feeds)


def transformer_block(seed: int = 0) -> Model:
    """Pre-norm block on one sequence x [D, T]: layer norm, single-head attention with a
    softmax over the keys, residual; layer norm, GELU feed-forward, residual."""
    rng = np.random.default_rng(seed)
    D, T, E, F = (ng.make_axis(n, a) for n, a in ((4, "D"), (3, "T"), (2, "E"), (6, "F")))
    S = ng.make_axis(3, "S")  # the key positions: T under another name
    D2 = ng.make_axis(4, "D2")
    p, feeds = _leaves(
        rng, g1=[D], b1=[D], wq=[E, D], wk=[E, D], wv=[E, D], wo=[D2, E],
        g2=[D], b2=[D], w1=[F, D], w2=[D2, F],
    )
    x = ng.placeholder([D, T], np.float64, name="x")
    a = L.layer_norm(x, p["g1"], p["b1"], [D])
    q = ng.dot(p["wq"], a)  # [E, T]
    k = ng.cast_axes(ng.dot(p["wk"], a), [E, S])
    v = ng.cast_axes(ng.dot(p["wv"], a), [E, S])
    scores = ng.dot(q, k) * float(1 / np.sqrt(E.length))  # [T, S]
    attn = ng.dot(L.softmax(scores, [S]), v)  # [T, E]
    x1 = x + ng.cast_axes(ng.axes_with_order(ng.dot(p["wo"], attn), [D2, T]), [D, T])
    h = L.gelu(ng.dot(p["w1"], L.layer_norm(x1, p["g2"], p["b2"], [D])))  # [F, T]
    out = x1 + ng.cast_axes(ng.axes_with_order(ng.dot(p["w2"], h), [D2, T]), [D, T])
    target = ng.placeholder([D, T], np.float64, name="target")
    cost = ng.sum(ng.square(out - target), out_axes=())
    feeds[x] = rng.normal(size=(4, 3))
    feeds[target] = rng.normal(size=(4, 3))
    return Model(cost, [p["wq"], p["g1"], p["w1"], x], feeds)
