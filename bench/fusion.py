"""What the `cpu` pipeline of rules/ buys on the numpy executor, measured side by side.

(a) Batchnorm forward + backward on x = [C, H, W, N]: the graph autodiff builds for batchnorm
    written from primitives (y, dx, dgamma, dbeta), against the same graph after the pipeline
    fused it into one BatchnormFprop and one BatchnormBprop. Target: fused >= 2x faster.
(b) Dot lowered by rules/dot.rules (reorder, flatten, one DotLowDimension, unflatten) on the
    executor, against np.einsum (optimize=True) on the same arrays. Target: within 1.1x.

Both sides run in this process, taking turns; each figure is the best of several runs. On a
busy machine a multi-threaded BLAS makes the Dot figures erratic (both sides); for steady ones
run with OPENBLAS_NUM_THREADS=1 (or your BLAS's equivalent).
Run: `python bench/fusion.py [--c 64 --hw 14 --n 32 --scale 1 --repeat 15]`.
"""

from __future__ import annotations

import argparse
import string
import sys
from pathlib import Path

import numpy as np

import ngrules as ng
from ngrules.ir.layers import batchnorm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from executor import best_of, max_rel_error  # noqa: E402  (bench/executor.py)

RULES = Path(__file__).resolve().parent.parent / "rules"
EPS = 1e-3


def cpu_pipeline(outputs):
    res = ng.rewrite(outputs, ng.load_rules(RULES), pipeline="cpu")
    assert res.stop == "fixpoint", res.message
    return res


# -- (a) batchnorm -------------------------------------------------------------------------------
def batchnorm_graph(c: int, hw: int, n: int, dtype=np.float32):
    """y and the gradients of sum(y * delta) for x, gamma, beta; returns (outputs, feeds)."""
    axes = [ng.make_axis(k, name) for name, k in (("C", c), ("H", hw), ("W", hw), ("N", n))]
    x = ng.placeholder(axes, dtype, name="x")
    delta = ng.placeholder(axes, dtype, name="delta")
    gamma, beta = (ng.placeholder(axes[:1], dtype, name=k) for k in ("gamma", "beta"))
    y = batchnorm(x, gamma, beta, EPS)
    cost = ng.sum(y * delta, out_axes=())
    rng = np.random.default_rng(0)
    feeds = {p: rng.normal(size=p.axes.lengths).astype(dtype) for p in (x, delta, gamma, beta)}
    return [y] + [ng.deriv(cost, p) for p in (x, gamma, beta)], feeds


def bench_batchnorm(c: int = 64, hw: int = 14, n: int = 32, repeat: int = 7) -> dict:
    outputs, feeds = batchnorm_graph(c, hw, n)
    res = cpu_pipeline(outputs)
    fired = res.fired()
    assert fired.get("batchnorm_fprop") == fired.get("batchnorm_bprop") == 1, fired
    unfused, fused = ng.compile_graph(outputs), ng.compile_graph(res.outputs)
    times = best_of(
        {"unfused": lambda: unfused.run(feeds), "fused": lambda: fused.run(feeds)}, repeat
    )
    return {
        "case": f"batchnorm fwd+bwd [C={c}, H=W={hw}, N={n}] float32",
        "nodes": (len(ng.toposort(outputs)), len(ng.toposort(res.outputs))),
        "baseline": times["unfused"],
        "ours": times["fused"],
        "speedup": times["unfused"] / times["fused"],
        "error": max_rel_error(fused.run(feeds), unfused.run(feeds)),
    }


# -- (b) lowered Dot vs einsum -------------------------------------------------------------------
def dot_case(x_spec: str, y_spec: str, lengths: dict[str, int], dtype=np.float32):
    """Dot of x and y, axes named by the letters of the specs; returns (dot, feeds, einsum spec)."""
    axes = {k: ng.make_axis(n, k) for k, n in lengths.items()}
    x = ng.placeholder([axes[k] for k in x_spec], dtype, name="x")
    y = ng.placeholder([axes[k] for k in y_spec], dtype, name="y")
    d = ng.dot(x, y)
    rng = np.random.default_rng(1)
    feeds = {p: rng.normal(size=p.axes.lengths).astype(dtype) for p in (x, y)}
    letters = dict(zip(lengths, string.ascii_lowercase))
    out = "".join(letters[a.name] for a in d.axes)
    spec = f"{''.join(letters[k] for k in x_spec)},{''.join(letters[k] for k in y_spec)}->{out}"
    return d, feeds, spec


def bench_dot(x_spec: str, y_spec: str, lengths: dict[str, int], repeat: int = 7) -> dict:
    d, feeds, spec = dot_case(x_spec, y_spec, lengths)
    res = cpu_pipeline([d])
    lowered = ng.compile_graph(res.outputs)
    xv, yv = feeds.values()
    times = best_of(
        {
            "einsum": lambda: np.einsum(spec, xv, yv, optimize=True),
            "lowered": lambda: lowered.run(feeds),
        },
        repeat,
    )
    return {
        "case": f"Dot {spec} {lengths} float32",
        "nodes": (1 + len(feeds), len(ng.toposort(res.outputs))),
        "baseline": times["einsum"],
        "ours": times["lowered"],
        "speedup": times["einsum"] / times["lowered"],
        "error": max_rel_error(lowered.run(feeds), [np.einsum(spec, xv, yv, optimize=True)]),
    }


DOTS = [  # a dense layer on a 4-D activation; the same with the operands' axes reordered
    ("OC", "CHWN", {"O": 128, "C": 64, "H": 14, "W": 14, "N": 32}),
    ("CO", "NHWC", {"O": 128, "C": 64, "H": 14, "W": 14, "N": 32}),
]


def report(rows: list[dict]) -> None:
    print(f"{'case':60s} {'nodes':>10s} {'baseline ms':>12s} {'rules ms':>10s} {'speedup':>8s}")
    for r in rows:
        nodes = "{}->{}".format(*r["nodes"])
        print(
            f"{r['case'][:60]:60s} {nodes:>10s} {r['baseline'] * 1e3:12.2f} "
            f"{r['ours'] * 1e3:10.2f} {r['speedup']:7.2f}x"
        )


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--c", type=int, default=64, help="batchnorm channels")
    parser.add_argument("--hw", type=int, default=14, help="batchnorm height and width")
    parser.add_argument("--n", type=int, default=32, help="batch size")
    parser.add_argument("--scale", type=float, default=1.0, help="scales the Dot lengths")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    rows = [bench_batchnorm(args.c, args.hw, args.n, args.repeat)]
    for x_spec, y_spec, lengths in DOTS:
        scaled = {k: max(1, round(v * args.scale)) for k, v in lengths.items()}
        rows.append(bench_dot(x_spec, y_spec, scaled, args.repeat))
    report(rows)
    print("targets: batchnorm speedup >= 2x; lowered Dot within 1.1x of einsum (speedup >= 0.91x)")
    return rows


if __name__ == "__main__":
    main()
