"""Equality saturation (issue 36): time, e-graph size and what extraction buys, on the
project's example models with the shipped `cpu` pipeline, on graphs where greedy rewriting is
stuck, on rule sets that grow forever, and the e-graph engine against egglog's on AC closure.

1. Models (`ngrules.interop.onnx.examples`: MLP, CNN, ResNet, transformer block;
   `bench/big_models.py`'s ResNet-50 at width 16, 64x64; `bench/multiroot.py`'s training MLP
   with batchnorm, 2, 10 and 40 layers): nodes and
   cost (bench/saturation_costs.md) of the input, the greedy `cpu` pipeline's output and the
   extracted graph; saturation and extraction seconds, e-nodes, classes, iterations, the
   extraction method; the numpy executor's best-of-N time of the greedy and extracted graphs
   on the same inputs, and the largest difference from the input's values.
2. Stuck: x*(y+z) - x*z and (x*y + x*z) - x*z with distribute, factor, cancel.
3. Limits: associativity + commutativity on a sum of 12 leaves, each limit in turn.
4. Engines: the closure of a sum of n leaves under associativity (both ways) and
   commutativity, which has exactly 3^n - 2^(n+1) + 1 Add e-nodes: ngrules' e-graph against
   egglog's (`pip install egglog==13.2.0`, skipped with a message when absent).

Rules enter unverified here (the pipeline's verdicts are measured apart: `--verify` verifies
them first, each alone, and reports the seconds). Run: `python bench/saturate.py [--tiny]
[--verify] [--repeat 20] [--ac 4,5,6,7,8]`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import ngrules as ng
from ngrules.saturation.costs import graph_cost

#: The rule sets (passes `algebra`, `growing`, `ac`), shared with the tests.
RULES = Path(__file__).resolve().parent / "saturation.rules"


def rule_set(*passes: str):
    """The rules of these passes of `saturation.rules`, as a rule set of their own."""
    from ngrules.engine.passes import as_ruleset

    every = ng.load_rules(RULES)
    return as_ruleset([r for p in passes for r in every.passes[p]])


def _best(outputs, feeds, repeat: int) -> float:
    program = ng.compile_graph(outputs)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        program.run(feeds, ignore_unused=True)
        best = min(best, time.perf_counter() - start)
    return best


def _feeds(outputs, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {p: rng.standard_normal(p.axes.lengths).astype(p.dtype)
            for p in ng.toposort(outputs) if p.op == "Placeholder"}


def _max_diff(a, b, feeds) -> float:
    """The largest difference of b's values from a's, relative to a's largest value."""
    want = ng.execute(a, feeds)
    got = ng.execute(b, feeds, ignore_unused=True)
    return max(float(np.max(np.abs(w - g)) / max(np.max(np.abs(w)), 1e-30))
               for w, g in zip(want, got))


def bench_model(name: str, library, repeat: int, verdicts=None, batch: int = 8) -> dict:
    from ngrules.interop.onnx import examples
    from ngrules.interop.onnx.importer import from_onnx

    if name.startswith("bn_mlp"):  # a training graph: batchnorm layers and their gradients
        from multiroot import deep_mlp  # bench/multiroot.py (this script's folder)

        outputs = deep_mlp(int(name[len("bn_mlp"):]), batch=batch)
    elif name == "resnet50":  # ResNet-50's structure at width 16, 64x64, batch 1
        from big_models import resnet50  # bench/big_models.py

        outputs = from_onnx(resnet50(width=16, size=64, classes=100))
    else:
        dim = "B" if name == "transformer" else "N"
        outputs = from_onnx(getattr(examples, name)(), lengths={dim: batch})
    start = time.perf_counter()
    greedy = ng.rewrite(outputs, library, pipeline="cpu").outputs
    greedy_s = time.perf_counter() - start
    result = ng.saturate(outputs, library, pipeline="cpu", verdicts=verdicts,
                         unverified=verdicts is None)
    feeds = _feeds(outputs)
    return {
        "model": name, "nodes": len(ng.toposort(outputs)), "greedy": len(ng.toposort(greedy)),
        "saturated": len(ng.toposort(result.outputs)), "cost": result.cost_before,
        "greedy cost": graph_cost(greedy), "sat cost": result.cost_after,
        "greedy s": greedy_s, "sat s": result.seconds, "extract s": result.extract_seconds,
        "e-nodes": result.enodes, "classes": result.classes, "iterations": result.iterations,
        "stop": result.stop, "method": result.extraction.method,
        "greedy run": _best(greedy, feeds, repeat), "sat run": _best(result.outputs, feeds,
                                                                     repeat),
        "greedy diff": _max_diff(outputs, greedy, feeds),
        "sat diff": _max_diff(outputs, result.outputs, feeds),
        "left out": len(result.admission.left_out),
    }


def bench_stuck() -> list[dict]:
    rules = rule_set("algebra")
    a = ng.make_axis(length=64, name="A")
    x, y, z = (ng.placeholder([a], name=n, dtype=np.float64) for n in "xyz")
    rows = []
    for label, g in (("x*(y+z) - x*z", x * (y + z) - x * z),
                     ("(x*y + x*z) - x*z", (x * y + x * z) - x * z)):
        greedy = ng.rewrite([g], rules.without({"distribute"}))
        loops = ng.rewrite([g], rules).stop
        result = ng.saturate([g], rules, unverified=True)
        rows.append({"graph": label, "input": len(ng.toposort([g])),
                     "greedy": len(ng.toposort(greedy.outputs)), "greedy+distribute": loops,
                     "saturated": len(ng.toposort(result.outputs)), "sat s": result.seconds,
                     "diff": _max_diff([g], result.outputs, _feeds([g]))})
    return rows


def _sum(count: int):
    a = ng.make_axis(length=4, name="A")
    leaves = [ng.placeholder([a], name=f"v{i}") for i in range(count)]
    total = leaves[0]
    for leaf in leaves[1:]:
        total = total + leaf
    return total


def bench_limits(leaves: int = 12) -> list[dict]:
    rules = rule_set("ac")
    total = _sum(leaves)
    rows = []
    for limit in ({"max_enodes": 2000}, {"iterations": 3, "seconds": 60.0}, {"seconds": 1.0}):
        start = time.perf_counter()
        result = ng.saturate([total], rules, unverified=True, **limit)
        rows.append({"limit": limit, "stop": result.stop, "e-nodes": result.enodes,
                     "wall s": time.perf_counter() - start,
                     "cost kept": result.cost_after == result.cost_before})
    return rows


def _egglog_ac(n: int) -> tuple[float, int] | None:
    try:
        from egglog import bindings
    except ImportError:
        return None
    term = '(Var "v0")'
    for i in range(1, n):
        term = f'(Add {term} (Var "v{i}"))'
    program = f"""(datatype Math (Var String) (Add Math Math))
(rewrite (Add (Add a b) c) (Add a (Add b c)))
(rewrite (Add a (Add b c)) (Add (Add a b) c))
(rewrite (Add a b) (Add b a))
(let $e {term})
(run 1000)
(print-size Add)"""
    eg = bindings.EGraph()
    start = time.perf_counter()
    out = eg.run_program(*eg.parse_program(program))
    seconds = time.perf_counter() - start
    return seconds, int(str(out[-1]).split("(")[-1].rstrip(")"))


def bench_engines(sizes) -> list[dict]:
    rules = rule_set("ac")
    rows = []
    for n in sizes:
        total = _sum(n)
        result = ng.saturate([total], rules, unverified=True, max_enodes=10**6, seconds=600,
                             use_z3=False)
        ours = result.seconds  # saturation only, as egglog's `run` (extraction apart)
        theirs = _egglog_ac(n)
        rows.append({"leaves": n, "exact": 3**n - 2 ** (n + 1) + 1,
                     "ngrules Add e-nodes": result.enodes - n, "ngrules s": ours,
                     "extract s": result.extract_seconds, "stop": result.stop,
                     "egglog e-nodes": theirs and theirs[1], "egglog s": theirs and theirs[0],
                     "ratio": theirs and ours / theirs[0]})
    return rows


def _print(title: str, rows: list[dict]) -> None:
    print(f"\n## {title}")
    if not rows:
        return
    keys = list(rows[0])
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(f"{row[k]:.3g}" if isinstance(row[k], float) else str(row[k])
                         for k in keys))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="one small model, small sizes (tests)")
    p.add_argument("--verify", action="store_true",
                   help="verify the pipeline's rules first (each alone) and use the verdicts")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--ac", default="4,5,6,7,8")
    args = p.parse_args(argv)
    library = ng.load_library()
    verdicts = None
    if args.verify:
        from ngrules.saturation.admit import verdict_statuses
        from ngrules.saturation.run import _chosen_rules

        start = time.perf_counter()
        chosen, _ = _chosen_rules(library, "cpu", None)
        verdicts = verdict_statuses([r for r in chosen if len(r.roots) == 1])
        print(f"verified {len(verdicts)} rules of the cpu pipeline in "
              f"{time.perf_counter() - start:.1f} s: {sorted(set(verdicts.values()))}")
    models = ["cnn"] if args.tiny else ["mlp", "cnn", "resnet", "transformer", "resnet50",
                                        "bn_mlp2", "bn_mlp10", "bn_mlp40"]
    out = {"models": [bench_model(m, library, 3 if args.tiny else args.repeat, verdicts,
                                  2 if args.tiny else 8) for m in models]}
    out["stuck"] = bench_stuck()
    out["limits"] = bench_limits(6 if args.tiny else 12)
    out["engines"] = bench_engines([4] if args.tiny else [int(s) for s in args.ac.split(",")])
    for title, rows in out.items():
        _print(title, rows)
    return out


if __name__ == "__main__":
    main()
