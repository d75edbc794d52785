"""How the rewrite's time per node grows with the graph: the peers' workloads at a small and a
large size, the sizes and the engines taking turns in one process, so load changes affect them
alike.

Each round times one rewrite (GC paused, CPU time; the graph built untimed, the result checked)
per size and engine: the worktree's engine (`new`), `plain`, and with `--base REV` the engine
of a git revision (see `ab.py`). The report gives per engine and size the median time per spec
node, and the median over rounds of the large size's time per node over the small size's
(1.0 is linear; `plain` shows what the machine's caches cost any engine).

Run: `python bench/scaling.py --harness PATH/TO/peers [--sizes 10k,1M] [--rounds 5]
[--base REV]`. 1M nodes need about 3 GB per engine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def engines_for(harness: Path, base: str | None) -> dict:
    """The engines compared: `new` (this worktree), optionally `base`, and `plain`."""
    from ab import adapter_on, base_package

    if base:
        sys.path.insert(0, str(base_package(base)))
    sys.path[:0] = [str(harness), str(HERE)]
    from adapters.plain_peer import PlainAdapter

    engines = {"new": adapter_on("ngrules")}
    if base:
        engines["base"] = adapter_on("ngrules_base")
    engines["plain"] = PlainAdapter()
    return engines


def measure(engines: dict, workload: str, sizes: list[int], rounds: int) -> dict:
    """{engine: {size: [seconds per node, one per round]}}, sizes and engines taking turns."""
    from peers import time_one
    from workloads import make_spec

    specs = [make_spec(workload, s) for s in sizes]
    per_node = {name: {s: [] for s in sizes} for name in engines}
    for _ in range(rounds):
        for spec, size in zip(specs, sizes):
            for name, engine in engines.items():
                seconds = time_one(engine, spec, time.process_time)
                per_node[name][size].append(seconds / spec.n_ops)
    return per_node


def report(workload: str, sizes: list[int], per_node: dict) -> None:
    small, large = sizes[0], sizes[-1]
    cells = " ".join(f"{f'us/node {s}':>16s}" for s in sizes)
    print(f"{workload}: {'engine':6s} {cells} {f'{large}/{small} per node (min-max)':>30s}")
    for name, times in per_node.items():
        ratios = sorted(b / a for a, b in zip(times[small], times[large]))
        us = " ".join(f"{statistics.median(times[s]) * 1e6:16.3f}" for s in sizes)
        print(f"{'':4s}{name:6s} {us} {statistics.median(ratios):17.2f}"
              f" ({ratios[0]:.2f}-{ratios[-1]:.2f})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", type=Path, required=True)
    parser.add_argument("--sizes", default="10k,1M")
    parser.add_argument("--workloads", default="W1,W2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base", help="git revision to compare with (see ab.py)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from peers import _size

    engines = engines_for(args.harness, args.base)
    sizes = [_size(s) for s in args.sizes.split(",")]
    for workload in args.workloads.split(","):
        report(workload, sizes, measure(engines, workload, sizes, args.rounds))


if __name__ == "__main__":
    main()
