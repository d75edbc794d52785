"""Which stage each zoo model fails in, and why: import, then for no rules and each shipped
pipeline rewrite, export and comparison with onnxruntime on random inputs.

Run: `python bench/zoo_status.py [--only bert_legacy_op17 ...] [--json out.json]`.
Prints a Markdown table, one row per file of tests/zoo/, a cell per stage: `ok`, or the first
stage that failed with the error's first line.

With `--zoo DIR` (the broad zoo that `bench/export_zoo_broad.py` writes, issue 34 item 3), a row
per (model, no rules or shipped pipeline) against the floors instead: imported, exported, equal
under onnxruntime (random inputs, zoo_stages' tolerances), ONNX nodes in and out (`Constant`
nodes not counted: an initializer written as a node), onnxsim's node count (DIR/onnxsim.json),
and onnxruntime's CPU time per run over the input's (one thread, every variant of a model in
turns, the median over `--rounds` rounds, output_quality's `timed`); then the counts against
each floor with their denominators.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo_stages as zs  # noqa: E402  (bench/zoo_stages.py)


def status_row(path: Path, pipelines: list[str], rules) -> dict[str, str]:
    import onnx

    model = onnx.load(str(path))
    row = {"model": path.stem}
    try:
        imported = zs.import_zoo_model(model)
    except Exception as exc:
        row["import"] = zs.short_reason(exc)
        return row
    row["import"] = "ok"
    for pipeline in [None, *pipelines]:
        row[pipeline or "no rules"] = zs.through_pipeline(model, imported, pipeline, rules).cell()
    return row


def nodes(model) -> int:
    """ONNX nodes, `Constant` nodes not counted (as bench/export_zoo_broad.py counts)."""
    return sum(n.op_type != "Constant" for n in model.graph.node)


def floor_rows(path: Path, pipelines: list[str], rules, sims: dict, rounds: int,
               runs: int) -> list[dict]:
    """One row per (model, no rules or pipeline) with what the floors of issue 34 read."""
    import onnx
    from output_quality import timed

    model = onnx.load(str(path))
    sim = sims.get(path.stem, {}).get("nodes", sims.get(path.stem, {}).get("error", "?"))
    base = {"model": path.stem, "in": nodes(model), "onnxsim": sim}
    names = ["no rules", *pipelines]
    try:
        imported = zs.import_zoo_model(model)
    except Exception as exc:
        return [{**base, "pipeline": n, "stage": "import", "why": zs.short_reason(exc)}
                for n in names]
    rows, sessions = [], {}
    feeds = zs.random_feeds(model)
    sessions["input"] = (zs.ort_session(model), feeds)
    for name in names:
        outcome = zs.through_pipeline(model, imported, None if name == "no rules" else name,
                                      rules, opset=None)
        row = {**base, "pipeline": name, "stage": outcome.stage, "why": outcome.reason}
        if outcome.exported is not None:
            row["out"] = nodes(outcome.exported)
            if outcome.stage in ("ok", "compare"):
                session = zs.ort_session(outcome.exported)
                wanted = {i.name for i in session.get_inputs()}
                sessions[name] = (session, {k: v for k, v in feeds.items() if k in wanted})
        rows.append(row)
    start = time.process_time()
    for _ in range(3):
        sessions["input"][0].run(None, feeds)
    once = (time.process_time() - start) / 3  # turns of ~30 ms: a tiny model's runs are µs
    latency = timed(sessions, rounds, max(1, min(runs, int(0.03 / max(once, 1e-7)))))
    for row in rows:
        if row["pipeline"] in sessions:
            row["latency"] = latency[row["pipeline"]]
    return rows


def print_floors(rows: list[dict], pipelines: list[str]) -> None:
    """The table, then each floor's count over its denominator."""
    print("| model | pipeline | stage | nodes in | out | onnxsim | latency | note |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        lat = f"{r['latency']:.2f}" if "latency" in r else ""
        print(f"| {r['model']} | {r['pipeline']} | {r['stage']} | {r['in']} | "
              f"{r.get('out', '')} | {r['onnxsim']} | {lat} | {r['why'][:70]} |")
    total = len(rows)
    ok = [r for r in rows if r["stage"] == "ok"]
    smaller = [r for r in ok if r["out"] <= r["in"]]
    fast = [r for r in ok if r.get("latency", 9) <= 1.05]
    print(f"\nrows (model x {{no rules, {', '.join(pipelines)}}}): {total}")
    print(f"imported: {sum(r['stage'] != 'import' for r in rows)}/{total}; exported: "
          f"{sum(r['stage'] in ('ok', 'compare', 'onnxruntime') for r in rows)}/{total}; "
          f"equal under onnxruntime: {len(ok)}/{total}")
    print(f"out <= in nodes: {len(smaller)}/{total}; latency <= 1.05x: {len(fast)}/{total}; "
          f"all three: {sum(r in smaller and r in fast for r in ok)}/{total}")
    best: dict[str, dict] = {}
    for r in ok:
        if r["pipeline"] != "no rules" and (r["model"] not in best
                                             or r["out"] < best[r["model"]]["out"]):
            best[r["model"]] = r
    models = sorted({r["model"] for r in rows})
    sims = [b for b in best.values() if isinstance(b["onnxsim"], int)]
    no_more = [b for b in sims if b["out"] <= b["onnxsim"]]
    fewer = [b for b in sims if b["out"] < b["onnxsim"]]
    print(f"best pipeline equal: {len(best)}/{len(models)}; onnxsim counted: {len(sims)}; "
          f"best <= onnxsim: {len(no_more)}/{len(models)}; best < onnxsim: "
          f"{len(fewer)}/{len(models)}")
    print("ties: " + ", ".join(f"{b['model']} ({b['out']})" for b in no_more if b not in fewer))
    print("more than onnxsim: " + ", ".join(f"{b['model']} ({b['out']} > {b['onnxsim']})"
                                           for b in sims if b not in no_more))


def main() -> None:
    from ngrules.lang.library import load_library

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="file stems of tests/zoo/ (default: all)")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--zoo", help="a folder of ONNX files: the floors of issue 34 on them")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=500,
                        help="at most this many runs per turn (each turn ~30 ms of CPU)")
    args = parser.parse_args()
    rules = load_library()
    pipelines = zs.shipped_pipelines()
    if args.zoo:
        import onnxruntime as ort

        ort.set_default_logger_severity(3)
        folder = Path(args.zoo)
        sims_file = folder / "onnxsim.json"
        sims = json.loads(sims_file.read_text()) if sims_file.exists() else {}
        rows = []
        for path in sorted(folder.glob("*.onnx")):
            if args.only and not any(path.stem.startswith(p) for p in args.only):
                continue
            rows += floor_rows(path, pipelines, rules, sims, args.rounds, args.runs)
            print(f"{path.stem}: " + ", ".join(f"{r['pipeline']} {r['stage']} {r.get('out')}"
                                               f"/{r['in']} {r.get('latency', 0):.2f}"
                                               for r in rows[-1 - len(pipelines):]),
                  file=sys.stderr, flush=True)
        print_floors(rows, pipelines)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        return
    files = [p for p in zs.zoo_files() if not args.only or p.stem in args.only]
    columns = ["model", "import", "no rules", *pipelines]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    rows = []
    for path in files:
        row = status_row(path, pipelines, rules)
        rows.append(row)
        print("| " + " | ".join(row.get(c, "") for c in columns) + " |", flush=True)
    passing = [r["model"] for r in rows if all(r.get(c) == "ok" for c in columns[1:])]
    print(f"\n{len(passing)} of {len(rows)} models pass every stage: {', '.join(passing)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
