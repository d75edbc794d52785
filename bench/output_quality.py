"""What ngrules writes, beside what the tools a user would pick instead write, on the zoo.

Each network of tests/zoo/ goes through ngrules (import, then no rules and each shipped
pipeline, then export as `ngrules apply` does, at the input's opset: standard ONNX, then
`--target onnxruntime`, then standard ONNX at opset 23, where attention may be ONNX's
Attention op) and through the peers: onnxsim,
onnxscript's optimizer (and its onnxruntime fusions, which write `com.microsoft` ops), and
onnxruntime's offline optimizer (the model ORT_ENABLE_ALL saves). For every output: its ONNX
node count, and its onnxruntime latency as a ratio to the input model's (the denominator),
every variant in one process, one thread, run in turns (in an order shuffled each round,
`--rounds` rounds of `--runs` runs each; the median over rounds of each round's ratio).
Each output is also run on the same random inputs as the input model and compared (1e-3): a
differing one is marked. A model ngrules cannot import shows the reason on its ngrules rows.

The peers are optional; a missing one is skipped with a message. To measure with them:
    pip install onnxsim onnxscript
Run: `python bench/output_quality.py [--only resnet_legacy_op17 ...] [--rounds 7 --runs 20]
[--level DISABLE_ALL]` (onnxruntime's graph optimisations for every variant; default all).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo_stages as zs  # noqa: E402  (bench/zoo_stages.py)


# -- the peers (each: model -> optimised model; ImportError when not installed) ----------------
def onnxsim_peer(model):
    import onnxsim

    simplified, ok = onnxsim.simplify(model)
    if not ok:
        raise RuntimeError("onnxsim's own check failed")
    return simplified


def onnxscript_peer(model):
    import onnxscript.optimizer

    return onnxscript.optimizer.optimize(model)


def onnxscript_ort_peer(model):
    import onnx_ir as ir
    import onnxscript.optimizer
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    irmodel = ir.serde.deserialize_model(onnxscript.optimizer.optimize(model))
    fused, _ = optimize_for_ort(irmodel)
    return ir.serde.serialize_model(fused)


def onnxruntime_peer(model):
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "optimized.onnx")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = path
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return onnx.load(path)


PEERS: dict[str, Callable] = {
    "onnxsim": onnxsim_peer,
    "onnxscript optimize": onnxscript_peer,
    "onnxscript + ort fusions": onnxscript_ort_peer,
    "onnxruntime ALL (offline)": onnxruntime_peer,
}


# -- variants of one model ---------------------------------------------------------------------
#: How ngrules writes: (target, opset) -> what the row's name adds (opset None: the input
#: model's, as `ngrules apply` writes it).
EXPORTS = {("onnx", None): "", ("onnxruntime", None): " --target onnxruntime",
           ("onnx", 23): " --opset 23"}


def ngrules_variants(model, pipelines: list[str], rules, exports=(("onnx", None),)) -> dict:
    """name -> exported model, or a string saying why there is none."""
    names = [(p, e, f"ngrules {p or 'round trip'}{EXPORTS[e]}")
             for e in exports for p in [None, *pipelines]]
    try:
        imported = zs.import_zoo_model(model)
    except Exception as exc:
        reason = f"cannot import: {zs.short_reason(exc, 70)}"
        return {name: reason for _, _, name in names}
    out = {}
    for pipeline, (target, opset), name in names:
        outcome = zs.through_pipeline(model, imported, pipeline, rules, target=target,
                                      opset=opset)
        if outcome.exported is None:
            out[name] = f"{outcome.stage}: {outcome.reason[:70]}"
        elif not outcome.ok:
            out[name] = (outcome.exported, f"{outcome.stage}: {outcome.reason[:60]}")
        else:
            out[name] = outcome.exported
    return out


def peer_variants(model, missing: set[str]) -> dict[str, object]:
    out = {}
    for name, peer in PEERS.items():
        if name in missing:
            continue
        try:
            out[name] = peer(model)
        except ImportError as exc:
            print(f"  (skipping {name}: {exc}; pip install onnxsim onnxscript)", file=sys.stderr)
            missing.add(name)
        except Exception as exc:
            out[name] = f"failed: {zs.short_reason(exc, 70)}"
    return out


def timed(sessions: dict[str, tuple], rounds: int, runs: int) -> dict[str, float]:
    """Each session's CPU time per run over the input's, the median of the rounds' ratios
    (the sessions take turns in every round, so a busy moment of the machine meets both
    sides, in an order shuffled each round, so no variant always runs right after the input:
    in a fixed order the first one measured up to 1.08x where the same graph later in the
    round measured 0.99x; CPU time, since on a shared machine wall time counts waits for a
    core); under "input", the input's median CPU seconds per run; under (name, "range"), the
    lowest and highest of the rounds' ratios."""
    samples: dict[str, list[float]] = {name: [] for name in sessions}
    order = random.Random(0)
    for _ in range(rounds):
        for name in order.sample(list(sessions), len(sessions)):
            session, feeds = sessions[name]
            start = time.process_time()
            for _ in range(runs):
                session.run(None, feeds)
            samples[name].append((time.process_time() - start) / runs)
    base = samples["input"]
    ratios = {n: statistics.median(t / b for t, b in zip(s, base)) for n, s in samples.items()}
    for n, s in samples.items():
        each = [t / b for t, b in zip(s, base)]
        ratios[n, "range"] = (min(each), max(each))
    ratios["input"] = statistics.median(base)
    return ratios


def measure(path: Path, pipelines, rules, rounds: int, runs: int, missing: set[str],
            level: str = "ENABLE_ALL") -> list[list]:
    """Rows (variant, nodes, nodes / input's, latency / input's, note, the latency ratio's
    lowest-highest round) for one zoo model, every variant run at onnxruntime's graph
    optimisation `level`."""
    import onnx

    model = onnx.load(str(path))
    feeds = zs.random_feeds(model)
    want = zs.run_onnxruntime(model, feeds)
    variants = {"input": model, **ngrules_variants(model, pipelines, rules, tuple(EXPORTS))}
    variants.update(peer_variants(model, missing))
    sessions, notes, nodes = {}, {}, {}
    for name, variant in variants.items():
        note = ""
        if isinstance(variant, tuple):
            variant, note = variant
        if isinstance(variant, str):
            notes[name] = variant
            continue
        nodes[name] = len(variant.graph.node)
        try:
            session = zs.ort_session(variant, level=level)
            wanted = {i.name for i in session.get_inputs()}
            own = {k: v for k, v in feeds.items() if k in wanted}
            got = session.run(None, own)
        except Exception as exc:
            notes[name] = f"onnxruntime: {zs.short_reason(exc, 60)}"
            continue
        same = all(np.allclose(g, w, rtol=zs.RTOL, atol=zs.ATOL) for g, w in zip(got, want))
        notes[name] = note or ("" if same else "DIFFERS from the input")
        sessions[name] = (session, own)
    latency = timed(sessions, rounds, runs)
    rows = []
    for name in variants:
        if name not in sessions:
            rows.append([name, nodes.get(name, ""), "", "", notes.get(name, ""), ""])
            continue
        ratio = nodes[name] / nodes["input"]
        note = notes[name] or ("" if name != "input" else f"{latency['input'] * 1e6:.0f} µs/run")
        speed = 1.0 if name == "input" else latency[name]
        low, high = latency[name, "range"]
        spread = "" if name == "input" else f"{low:.2f}-{high:.2f}"
        rows.append([name, nodes[name], f"{ratio:.2f}", f"{speed:.2f}", note, spread])
    return rows


def main() -> None:
    from ngrules.lang.library import load_library

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="file stems of tests/zoo/ (default: all)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--level", default="ENABLE_ALL",
                        choices=["DISABLE_ALL", "ENABLE_BASIC", "ENABLE_EXTENDED", "ENABLE_ALL"],
                        help="onnxruntime's graph optimisations for every variant (default: "
                             "all; DISABLE_ALL: what was written runs as written)")
    args = parser.parse_args()
    rules = load_library()
    pipelines = zs.shipped_pipelines()
    missing: set[str] = set()
    import onnxruntime as ort

    ort.set_default_logger_severity(3)
    for path in zs.zoo_files():
        if args.only and path.stem not in args.only:
            continue
        rows = measure(path, pipelines, rules, args.rounds, args.runs, missing, args.level)
        print(f"\n### {path.stem}\n")
        print("| variant | ONNX nodes | nodes / input's | latency / input's | note | "
              "latency / input's, lowest-highest round |")
        print("|---|---:|---:|---:|---|---:|")
        for row in rows:
            print("| " + " | ".join(str(c) for c in row) + " |", flush=True)


if __name__ == "__main__":
    main()
