"""`ngrules demo`: an MLP layer with batchnorm, built from primitives, differentiated, executed."""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np

from . import frontend as F
from .autodiff import deriv
from .axes import make_axis
from .executor import execute
from .graph import toposort


def batchnorm_mlp(C: int = 64, N: int = 32, D: int = 48, eps: float = 1e-3, dtype=np.float32):
    """tanh(batchnorm(W @ x)) with a squared-error cost; returns (outputs, feeds)."""
    c, n, d = make_axis(C, "C"), make_axis(N, "N"), make_axis(D, "D")
    x = F.placeholder([d, n], dtype, name="x")
    w = F.placeholder([c, d], dtype, name="w")
    gamma = F.placeholder([c], dtype, name="gamma")
    beta = F.placeholder([c], dtype, name="beta")
    h = F.dot(w, x)
    mu = F.mean(h, out_axes=[c])
    var = F.variance(h, out_axes=[c])
    y = F.tanh(gamma * ((h - mu) * F.reciprocal(F.sqrt(var + eps))) + beta)
    cost = F.sum(y * y, out_axes=())
    outputs = [y] + [deriv(cost, p) for p in (x, w, gamma, beta)]
    rng = np.random.default_rng(0)
    feeds = {p: rng.standard_normal(p.axes.lengths).astype(dtype) for p in (x, w, gamma, beta)}
    return outputs, feeds


def run_demo(args: argparse.Namespace) -> int:
    outputs, feeds = batchnorm_mlp()
    nodes = toposort(outputs)
    counts = Counter(n.op for n in nodes)
    print(f"graph: {len(nodes)} nodes ({', '.join(f'{op} {k}' for op, k in counts.most_common())})")
    start = time.perf_counter()
    values = execute(outputs, feeds)
    elapsed = time.perf_counter() - start
    for name, v in zip(["y", "dx", "dw", "dgamma", "dbeta"], values):
        print(f"{name:7s} shape {str(v.shape):10s} mean {float(np.mean(v)):+.5f}")
    print(f"executed in {elapsed * 1e3:.1f} ms")
    return 0
