"""Equality saturation with TASO's and Tensat's rules on the graphs of their evaluation
(issue 36, item 4), against the greedy `inference` pipeline and onnxruntime's offline
optimizer, on onnxruntime's CPU.

For each graph of `bench/peer_graphs.py`: the greedy `inference` pipeline's output; the
graph saturated (`ng.saturate`) with the same pipeline's passes plus the peer rules of
`bench/taso_tensat.rules` that `verify` finds verified, proved or looping (a wrong or
unverified one is left out and named); onnxruntime's offline optimizer's output (the model
ORT_ENABLE_ALL saves). Reported: ONNX nodes, saturation and extraction seconds, e-nodes, why
saturation stopped, whether each output equals the input's under onnxruntime (rtol 1e-3,
atol 1e-4) on random inputs, and onnxruntime CPU latency (one thread, every variant run at
ORT_ENABLE_ALL, variants taking turns in shuffled order each round; the median of the
rounds' ratios to the input's), beside Tensat's published search times (theirs are TASO's
cost model on a GPU: compare search time, not speed-ups).

The shipped library's rules enter unverified here, as in `bench/saturate.py` (all are
verified: `bench/verify_library.py`). Run: `python bench/saturate_peers.py [--only bert ...]
[--rounds 9 --runs 20] [--seconds 10]`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peer_graphs  # noqa: E402  (bench/peer_graphs.py)
import zoo_stages as zs  # noqa: E402  (bench/zoo_stages.py)

import ngrules as ng  # noqa: E402

PEER_RULES = Path(__file__).resolve().parent / "taso_tensat.rules"

#: The peer rule passes saturation runs (`taso_comm` is left out: commutative ops already
#: match in both orders; `taso_as_stated` holds TASO's conv scalar axiom, wrong in IEEE floats).
PEER_PASSES = ["taso_ew", "taso_reverse", "taso_transpose", "taso_matmul", "taso_conv",
               "taso_concat", "tensat_multi"]

#: Tensat's paper (MLSys 2021, Table 2): search seconds of TASO and Tensat, on their GPU.
PUBLISHED = {"bert": (13.6, 1.4), "resnext50": (25.3, 0.7), "nasnet_a": (1226, 10.6),
             "nasrnn": (177.3, 0.5), "inception_v3": (68.6, 5.1), "squeezenet": (16.4, 0.3),
             "vgg19": (8.9, 0.4)}


def peer_verdicts(rules=None) -> dict[str, str]:
    """Each peer rule's verdict status, from `ng.verify` (each rule in its pass) under the
    derandomised `ci` profile that `ngrules verify` uses (the same verdicts every run)."""
    from hypothesis import settings

    from ngrules.verification.profiles import register_profiles

    register_profiles()
    settings.load_profile("ci")
    report = ng.verify(rules or ng.load_rules(PEER_RULES))
    return {v.rule.name: v.status for v in report.verdicts}


def rule_set(verdicts: dict[str, str] | None = None, passes=PEER_PASSES):
    """The shipped library plus the peer rules whose verdict admits them (all of `passes`
    when `verdicts` is None), and the passes to saturate with: the `inference` pipeline's
    with the peer passes before `recompose`."""
    from ngrules.lang.library import library_path

    rules = ng.load_rules(library_path(), PEER_RULES)
    keep = {"verified", "proved", "loops"}
    peer = {r.name for p in passes for r in rules.passes[p]}
    left_out = sorted(n for n in peer if verdicts is not None and verdicts.get(n) not in keep)
    names = list(rules.pipelines["inference"])
    at = names.index("recompose")
    return rules.without(set(left_out)), names[:at] + list(passes) + names[at:], left_out


def _export(outputs, imported):
    return ng.to_onnx(outputs, output_names=imported.output_names, opset=17)


def variants(model, rules, passes, seconds: float) -> tuple[dict, dict]:
    """name -> ONNX model for the input, greedy, saturated and onnxruntime offline outputs;
    and the saturation's figures."""
    from output_quality import onnxruntime_peer  # bench/output_quality.py

    imported = zs.import_zoo_model(model)
    start = time.perf_counter()
    greedy = ng.rewrite(imported.outputs, rules, pipeline="inference")
    greedy_s = time.perf_counter() - start
    start = time.perf_counter()
    sat = ng.saturate(imported.outputs, rules, passes=passes, unverified=True, seconds=seconds)
    wall = time.perf_counter() - start
    out = {"input": model, "greedy": _export(greedy.outputs, imported),
           "saturated": _export(sat.outputs, imported), "ort offline": onnxruntime_peer(model)}
    figures = {"greedy s": greedy_s, "sat s": sat.seconds, "extract s": sat.extract_seconds,
               "wall s": wall, "e-nodes": sat.enodes, "stop": sat.stop,
               "method": sat.extraction.method, "applied": dict(sat.applied),
               "cost": (sat.cost_before, sat.cost_after)}
    return out, figures


def measure(name: str, rules, passes, rounds: int, runs: int, seconds: float) -> dict:
    from output_quality import timed

    model = peer_graphs.build(name)
    models, row = variants(model, rules, passes, seconds)
    feeds = zs.random_feeds(model)
    want = zs.run_onnxruntime(model, feeds)
    sessions = {}
    for label, m in models.items():
        session = zs.ort_session(m)
        got = session.run(None, feeds)
        row[f"{label} equal"] = all(np.allclose(g, w, rtol=zs.RTOL, atol=zs.ATOL)
                                    for g, w in zip(got, want))
        row[f"{label} nodes"] = len(m.graph.node)
        sessions[label] = (session, feeds)
    ops = {label: sorted(n.op_type for n in m.graph.node) for label, m in models.items()}
    row["same ops as greedy"] = ops["saturated"] == ops["greedy"]
    latency = timed(sessions, rounds, runs)
    row.update({f"{label} latency": latency[label] for label in models if label != "input"})
    row["input ms"] = latency["input"] * 1e3
    row["graph"] = name
    return row


def table(rows: list[dict]) -> str:
    head = ("| graph | ONNX nodes: input / greedy / saturated / ort offline | saturate + "
            "extract s | e-nodes (stop) | equal | latency / input's: greedy / saturated / ort "
            "offline | saturated / greedy | Tensat's search s (TASO's) |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    same = " (same ops)"
    for r in rows:
        taso, tensat = PUBLISHED.get(r["graph"], ("", ""))
        equal = all(r[f"{k} equal"] for k in ("greedy", "saturated", "ort offline"))
        lines.append(
            f"| {r['graph']} | {r['input nodes']} / {r['greedy nodes']} / "
            f"{r['saturated nodes']} / {r['ort offline nodes']} | {r['sat s']:.2f} + "
            f"{r['extract s']:.2f} | {r['e-nodes']} ({r['stop']}) | "
            f"{'yes' if equal else 'NO'} | {r['greedy latency']:.3f} / "
            f"{r['saturated latency']:.3f} / {r['ort offline latency']:.3f} "
            f"({r['input ms']:.2f} ms) | {r['saturated latency'] / r['greedy latency']:.3f}"
            f"{same if r['same ops as greedy'] else ''} | "
            f"{tensat} ({taso}) |")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(peer_graphs.GRAPHS))
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    import onnxruntime as ort

    ort.set_default_logger_severity(3)
    start = time.perf_counter()
    verdicts = peer_verdicts()
    counts: dict[str, int] = {}
    for status in verdicts.values():
        counts[status] = counts.get(status, 0) + 1
    rules, passes, left_out = rule_set(verdicts)
    print(f"peer rules: {counts} in {time.perf_counter() - start:.1f} s; left out: "
          f"{', '.join(left_out) or 'none'}", flush=True)
    rows = []
    for name in args.only or peer_graphs.GRAPHS:
        row = measure(name, rules, passes, args.rounds, args.runs, args.seconds)
        print(f"{name}: {row}", flush=True)
        rows.append(row)
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
