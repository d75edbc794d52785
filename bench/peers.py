"""The peers' rewrite benchmark, side by side in one process: ngrules vs `plain` and tinygrad.

The peers' harness (`run_peers.py`) runs each engine in its own process, one after another: on
a loaded machine their timings come from different moments. This runs the same workloads and
adapters taking turns in one process (each graph built untimed, then its rewrite timed with
the cyclic GC paused for every engine, its result checked against the spec), and reports per
size the median and range, over rounds, of ngrules' speed relative to each peer, and ngrules'
time per node (linear scaling keeps it flat). tinygrad is skipped if it is not installed.
Times are CPU times by default: on a machine shared with other work, the wall time of a
rewrite longer than a scheduler time slice includes waits the CPU time leaves out (`--wall`
measures wall-clock time instead).

Run: `python bench/peers.py --harness PATH/TO/peers [--sizes 1k,10k,100k,1M] [--rounds 3]`
(PATH/TO/peers holds `workloads.py` and `adapters/`; this folder must be importable too).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path


def _size(text: str) -> int:
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * scale)


def load_adapters(harness: Path, tinygrad: bool = True) -> dict:
    """plain, tinygrad (when installed and asked for) and ngrules, each built once."""
    sys.path[:0] = [str(harness), str(Path(__file__).resolve().parent)]
    from adapters.plain_peer import PlainAdapter
    from peer_adapter import NgrulesAdapter

    adapters = {"plain": PlainAdapter(), "ngrules": NgrulesAdapter()}
    if not tinygrad:
        return adapters
    try:
        from adapters.tinygrad_peer import TinygradAdapter
    except ImportError:
        return adapters
    adapters["tinygrad"] = TinygradAdapter()
    return adapters


def time_one(adapter, spec, clock=time.process_time) -> float:
    """Seconds for one rewrite (GC paused), after an untimed build; the count is checked."""
    graph = adapter.build(spec)
    gc.collect()
    gc.disable()
    start = clock()
    result = adapter.rewrite(graph, spec)
    seconds = clock() - start
    gc.enable()
    counts = adapter.count(result, spec)
    assert counts.nodes == spec.expected_ops and counts.fused == spec.expected_fused, counts
    del graph, result
    gc.collect()
    return seconds


def measure(adapters: dict, workload: str, size: int, rounds: int, clock) -> dict:
    from workloads import make_spec

    spec = make_spec(workload, size)
    times: dict[str, list[float]] = {name: [] for name in adapters}
    for _ in range(rounds):  # the engines take turns, so load changes affect them alike
        for name, adapter in adapters.items():
            times[name].append(time_one(adapter, spec, clock))
    row = {"workload": workload, "nodes": spec.n_ops, "times": times}
    for peer in adapters:
        if peer != "ngrules":  # speed of ngrules relative to the peer, round by round
            row[peer] = sorted(p / n for p, n in zip(times[peer], times["ngrules"]))
    row["us_per_node"] = statistics.median(times["ngrules"]) / spec.n_ops * 1e6
    return row


def report(rows: list[dict]) -> None:
    peers = [k for k in ("plain", "tinygrad") if k in rows[0]]
    head = "".join(f" {'x ' + p + ' (med, min-max)':>26s}" for p in peers)
    print(f"{'workload':8s} {'nodes':>9s} {'ngrules ms':>11s}{head} {'us/node':>8s}")
    for r in rows:
        cells = "".join(
            f" {statistics.median(r[p]):9.3f} ({r[p][0]:.3f}-{r[p][-1]:.3f}){'':3s}" for p in peers
        )
        ms = statistics.median(r["times"]["ngrules"]) * 1e3
        print(f"{r['workload']:8s} {r['nodes']:9d} {ms:11.1f}{cells} {r['us_per_node']:8.2f}")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", type=Path, required=True, help="the peers' folder")
    parser.add_argument("--sizes", default="1k,10k,100k")
    parser.add_argument("--workloads", default="W1,W2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wall", action="store_true", help="wall-clock time, not CPU time")
    parser.add_argument("--no-tinygrad", action="store_true", help="plain and ngrules only")
    args = parser.parse_args(argv)
    adapters = load_adapters(args.harness, tinygrad=not args.no_tinygrad)
    clock = time.perf_counter if args.wall else time.process_time
    rows = [
        measure(adapters, w, _size(s), args.rounds, clock)
        for w in args.workloads.split(",")
        for s in args.sizes.split(",")
    ]
    report(rows)
    return rows


if __name__ == "__main__":
    main()
