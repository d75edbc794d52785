"""`ngrules demo`: the main job on an embedded example.

An MLP of three layers with batchnorm and leaky relu is written from primitives, differentiated,
rewritten by the shipped `cpu` pipeline (fusion, simplification, Dot lowering, shaping), and
executed before and after on the same random data.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import numpy as np

from ngrules.engine.driver import rewrite
from ngrules.ir import frontend as F
from ngrules.ir.autodiff import deriv
from ngrules.ir.axes import make_axis
from ngrules.ir.executor import compile_graph
from ngrules.ir.graph import toposort
from ngrules.ir.layers import batchnorm, leaky_relu
from ngrules.lang.library import load_library, short_location

SLOPE = 0.01


def mlp(widths=(64, 48, 32, 16), batch: int = 32, dtype=np.float64):
    """A 3-layer MLP with batchnorm and relu and its gradients; returns (outputs, feeds)."""
    n = make_axis(batch, "N")
    axes = [make_axis(w, f"H{i}") for i, w in enumerate(widths)]
    x = F.placeholder([axes[0], n], dtype, name="x")
    params, h = [], x
    for i in range(1, len(axes)):
        w = F.placeholder([axes[i], axes[i - 1]], dtype, name=f"w{i}")
        gamma = F.placeholder([axes[i]], dtype, name=f"gamma{i}")
        beta = F.placeholder([axes[i]], dtype, name=f"beta{i}")
        params += [w, gamma, beta]
        h = F.dot(w, h)
        h = batchnorm(h, gamma, beta)
        if i < len(axes) - 1:
            h = leaky_relu(h, SLOPE)
    cost = F.sum(h * h, out_axes=())
    outputs = [cost] + [deriv(cost, p) for p in params]
    rng = np.random.default_rng(0)
    feeds = {p.name: rng.standard_normal(p.axes.lengths).astype(dtype) for p in [x] + params}
    return outputs, feeds


def _counts(outputs) -> Counter:
    return Counter(node.op for node in toposort(outputs))


REPEAT = 20
#: Where the demo writes its pictures unless `--out` says otherwise (ignored by the repo's
#: .gitignore, so running the demo in a checkout leaves nothing to commit).
OUT = "ngrules-demo"


def _best_time(program, feeds, repeat: int = REPEAT) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        program.run(feeds)
        best = min(best, time.perf_counter() - start)
    return best


def _print_counts(before: Counter, after: Counter) -> None:
    print(f"{'op':18s} {'before':>7s} {'after':>7s}")
    for op in sorted(set(before) | set(after), key=lambda o: (-before[o], o)):
        print(f"{op:18s} {before[op]:7d} {after[op]:7d}")
    print(f"{'total':18s} {sum(before.values()):7d} {sum(after.values()):7d}")


def _pictures(before, after, out: Path) -> None:
    from ngrules.cli.picture import write_picture

    out.mkdir(parents=True, exist_ok=True)
    for name, graph in (("before", before), ("after", after)):
        svg = write_picture(graph, out / f"{name}.dot", title=f"demo graph, {name} rewriting")
        shown = svg if svg is not None else f"{out / name}.dot (install Graphviz for SVG)"
        print(f"picture: {shown}")
    print(f"(pictures are written to {out}/; --out FOLDER to change)")


def run_demo(args: argparse.Namespace) -> int:
    if args.onnx:
        from ngrules.cli import demo_onnx

        return demo_onnx.run(args)
    outputs, feeds = mlp()
    result = rewrite(outputs, load_library(), pipeline="cpu")
    before, after = _counts(outputs), _counts(result.outputs)
    print("MLP, 3 layers with batchnorm and relu, cost and gradients, float64\n")
    _print_counts(before, after)
    print(f"\nrules fired ({len(result.trace)} rewrites, stopped at {result.stop}):")
    locations = {f.rule: f.location for f in result.trace}
    for name, count in result.fired().items():
        print(f"  {count:5d}  {name:24s} {short_location(locations[name])}")
    slow, fast = compile_graph(outputs), compile_graph(result.outputs)
    diff = max(
        float(np.max(np.abs(a - b)) / (1.0 + np.max(np.abs(a))))
        for a, b in zip(slow.run(feeds), fast.run(feeds))
    )
    print(f"\nlargest relative difference between the two results: {diff:.2e}")
    ratio = _best_time(slow, feeds) / _best_time(fast, feeds)
    print(
        f"speed-up from rewriting: {ratio:.2f}x (numpy executor, best of {REPEAT} runs of "
        "each graph on the same inputs, before / after)"
    )
    _pictures(outputs, result.outputs, Path(args.out))
    return 0 if diff < 1e-8 else 1


def register(sub) -> None:
    from ngrules.cli.common import add_command

    p = add_command(
        sub,
        "demo",
        run_demo,
        "the main job on an example: an MLP with batchnorm and "
        "relu, differentiated, rewritten by the cpu pipeline, executed before and after",
        "ngrules demo --out demo-out",
    )
    p.add_argument(
        "--out", default=OUT, help=f"folder for the pictures and models (default: ./{OUT}/)"
    )
    p.add_argument("--onnx", action="store_true",
                   help="instead: three ONNX models (MLP, CNN, transformer block) imported, "
                        "rewritten, exported and checked with onnxruntime")
