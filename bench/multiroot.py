"""Multi-root fusion scales linearly: a deep MLP with batchnorm, forward and backward, through
the `cpu` pipeline of rules/, at 80, 160, 320 and 640 layers.

Each layer is dot, batchnorm (from primitives) and leaky relu; autodiff adds the backward pass.
The pipeline fuses every layer's batchnorm forward and backward (two multi-root rules) and its
relu: one round of multi-root matching takes every layer's match, so the time grows with the
size of the network. Target: 640 layers in at most 10x the time of 80 (8x the nodes).
The sizes take turns in each repeat (CPU time, medians).
Run: `python bench/multiroot.py [--layers 80,160,320,640] [--repeat 3]`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

import ngrules as ng
from ngrules.ir.layers import batchnorm, leaky_relu

RULES = Path(__file__).resolve().parent.parent / "rules"


def deep_mlp(layers: int, width: int = 4, batch: int = 8, dtype=np.float32):
    """The cost of a deep MLP of `layers` batchnorm layers and its gradients.

    Layers alternate between two feature axes and derive their parameters from six shared ones
    (a weight, and gamma and beta scaled by a constant of the layer's own), so six gradients
    cover every layer's backward pass: differentiating for each parameter of each layer would
    take time quadratic in the depth to build.
    """
    n = ng.make_axis(batch, "N")
    axes = [ng.make_axis(width, "H0"), ng.make_axis(width, "H1")]
    x = ng.placeholder([axes[0], n], dtype, name="x")
    shared = {}
    for k, (fan_in, fan_out) in enumerate((axes, axes[::-1])):
        shared[k] = (
            ng.placeholder([fan_out, fan_in], dtype, name=f"w{k}"),
            ng.placeholder([fan_out], dtype, name=f"gamma{k}"),
            ng.placeholder([fan_out], dtype, name=f"beta{k}"),
        )
    a = x
    for i in range(layers):
        w, gamma, beta = shared[i % 2]
        scale = 1.0 + i / layers
        a = leaky_relu(batchnorm(ng.dot(w, a), gamma * scale, beta * scale, 1e-3), 0.1)
    cost = ng.sum(a * a, out_axes=())
    return [cost] + [ng.deriv(cost, p) for k in shared for p in shared[k]]


def fuse(outputs, rules):
    """The cpu pipeline on the network, checked: every layer fused."""
    res = ng.rewrite(outputs, rules, pipeline="cpu")
    assert res.stop == "fixpoint", res.message
    return res


def measure(sizes: list[int], rules, repeat: int) -> list[dict]:
    """Median CPU seconds of fusing each size; the sizes take turns in every repeat, so a
    change in machine load affects them alike."""
    graphs = {layers: deep_mlp(layers) for layers in sizes}
    times: dict[int, list[float]] = {layers: [] for layers in sizes}
    for _ in range(repeat):
        for layers, outputs in graphs.items():
            start = time.process_time()  # CPU time: steadier than wall time on a shared machine
            res = fuse(outputs, rules)
            times[layers].append(time.process_time() - start)
            fired = res.fired()
            assert fired["batchnorm_fprop"] == fired["batchnorm_bprop"] == layers, fired
            del res
    return [
        {
            "layers": layers,
            "nodes": len(ng.toposort(graphs[layers])),
            "seconds": statistics.median(times[layers]),
            "spread": (min(times[layers]), max(times[layers])),
        }
        for layers in sizes
    ]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="80,160,320,640")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    rules = ng.load_rules(RULES)
    rows = measure([int(k) for k in args.layers.split(",")], rules, args.repeat)
    print(f"{'layers':>7s} {'nodes':>8s} {'median cpu s':>12s} {'min-max s':>15s} {'x first':>8s}")
    for r in rows:
        lo, hi = r["spread"]
        print(
            f"{r['layers']:7d} {r['nodes']:8d} {r['seconds']:9.3f} {lo:7.3f}-{hi:<7.3f} "
            f"{r['seconds'] / rows[0]['seconds']:8.2f}"
        )
    if len(rows) > 1:
        growth = rows[-1]["seconds"] / rows[0]["seconds"]
        print(
            f"{rows[-1]['layers']} vs {rows[0]['layers']} layers: x{growth:.1f} the time for "
            f"x{rows[-1]['nodes'] / rows[0]['nodes']:.1f} the nodes (target: <= 10x)"
        )
    return rows


if __name__ == "__main__":
    main()
