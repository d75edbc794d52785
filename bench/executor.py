"""Executor overhead: the ngrules numpy executor vs straight-line numpy, in one process.

(a) An MLP layer with batchnorm written from primitives, tanh(batchnorm(W x)), forward and
    backward (autodiff's graph for dx, dW, dgamma, dbeta), against a hand-written numpy
    forward + backward of the same maths.
(b) A long elementwise chain (tanh, negative, add) on small tensors, against a numpy loop
    making the same ufunc calls: the executor's per-node overhead.

Each figure is the best of several runs; compiling the graph is timed separately.
Run: `python bench/executor.py [--c 256 --n 128 --d 256 --chain 10000 --side 8]`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import ngrules as ng
from ngrules.ir.layers import batchnorm

EPS = 1e-3


def best_of(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """The fastest of `repeat` timed calls of each function, in seconds.

    The functions take turns, so a change in machine load affects them alike.
    """
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def max_rel_error(got, want) -> float:
    """The largest error over all arrays, relative to each reference array's largest value."""
    return max(
        float(np.max(np.abs(g - w)) / max(float(np.max(np.abs(w))), 1e-30))
        for g, w in zip(got, want)
    )


# -- (a) MLP layer with batchnorm ----------------------------------------------------------------
def mlp_graph(c: int, n: int, d: int, dtype=np.float32):
    """tanh(batchnorm(W x)) and the gradients of sum(y * y); returns (outputs, placeholders)."""
    C, N, D = ng.make_axis(c, "C"), ng.make_axis(n, "N"), ng.make_axis(d, "D")
    x = ng.placeholder([D, N], dtype, name="x")
    w = ng.placeholder([C, D], dtype, name="w")
    gamma = ng.placeholder([C], dtype, name="gamma")
    beta = ng.placeholder([C], dtype, name="beta")
    h = ng.dot(w, x)
    y = ng.tanh(batchnorm(h, gamma, beta, EPS))
    cost = ng.sum(y * y, out_axes=())
    params = (x, w, gamma, beta)
    return [y] + [ng.deriv(cost, p) for p in params], params


def mlp_numpy(x, w, gamma, beta):
    """The same forward and backward written by hand: [y, dx, dw, dgamma, dbeta]."""
    h = w @ x
    m = h.shape[1]
    centred = h - h.mean(axis=1, keepdims=True)
    inv = 1.0 / np.sqrt((centred * centred).mean(axis=1, keepdims=True) + EPS)
    xhat = centred * inv
    y = np.tanh(gamma[:, None] * xhat + beta[:, None])
    dz = 2.0 * y * (1.0 - y * y)
    dbeta, dgamma = dz.sum(axis=1), (dz * xhat).sum(axis=1)
    dxhat = dz * gamma[:, None]
    proj = (dxhat * xhat).sum(axis=1, keepdims=True)
    dh = (inv / m) * (m * dxhat - dxhat.sum(axis=1, keepdims=True) - xhat * proj)
    return [y, w.T @ dh, dh @ x.T, dgamma, dbeta]


def bench_mlp(c: int = 256, n: int = 128, d: int = 256, repeat: int = 20, dtype=np.float32):
    start = time.perf_counter()
    outputs, params = mlp_graph(c, n, d, dtype)
    program = ng.compile_graph(outputs)
    build = time.perf_counter() - start
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(p.axes.lengths).astype(dtype) for p in params]
    feeds = dict(zip(params, values))
    got, want = program.run(feeds), mlp_numpy(*values)
    return {
        "name": f"MLP+batchnorm fwd+bwd C={c} N={n} D={d}",
        "nodes": len(program.steps),
        "build_ms": build * 1e3,
        **best_of(
            {"executor": lambda: program.run(feeds), "numpy": lambda: mlp_numpy(*values)}, repeat
        ),
        "error": max_rel_error(got, want),
    }


# -- (b) elementwise chain ---------------------------------------------------------------------
def chain_graph(length: int, side: int):
    """tanh, negative, add x, repeated: `length` elementwise nodes on a side x side tensor."""
    x = ng.placeholder({"A": side, "B": side}, np.float64, name="x")
    y = x
    for i in range(length):
        y = (ng.tanh(y), ng.negative(y), ng.add(y, x))[i % 3]
    return y, x


def chain_numpy(xv, length: int):
    y = xv
    for i in range(length):
        k = i % 3
        y = np.tanh(y) if k == 0 else np.negative(y) if k == 1 else np.add(y, xv)
    return y


def bench_chain(length: int = 10_000, side: int = 8, repeat: int = 20):
    start = time.perf_counter()
    y, x = chain_graph(length, side)
    program = ng.compile_graph([y])
    build = time.perf_counter() - start
    xv = np.random.default_rng(1).uniform(-1, 1, (side, side))
    got, want = program.run({x: xv}), [chain_numpy(xv, length)]
    return {
        "name": f"elementwise chain {length} nodes {side}x{side}",
        "nodes": len(program.steps),
        "build_ms": build * 1e3,
        **best_of(
            {"executor": lambda: program.run({x: xv}), "numpy": lambda: chain_numpy(xv, length)},
            repeat,
        ),
        "error": max_rel_error(got, want),
    }


# -- report ----------------------------------------------------------------------------------
def print_table(rows) -> None:
    print(
        f"{'benchmark':44s} {'steps':>6s} {'executor':>11s} {'numpy':>11s} {'ratio':>6s} "
        f"{'µs/node':>8s} {'max err':>8s}"
    )
    for r in rows:
        overhead = (r["executor"] - r["numpy"]) / r["nodes"] * 1e6
        print(
            f"{r['name']:44s} {r['nodes']:6d} {r['executor'] * 1e3:9.3f}ms "
            f"{r['numpy'] * 1e3:9.3f}ms {r['executor'] / r['numpy']:5.2f}x "
            f"{overhead:8.2f} {r['error']:8.1e}"
        )


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--c", type=int, default=256)
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--chain", type=int, default=10_000)
    parser.add_argument("--side", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    rows = [
        bench_mlp(args.c, args.n, args.d, args.repeat),
        bench_chain(args.chain, args.side, args.repeat),
    ]
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
