"""`explain` on a 10,000-node graph (target: at most 100 ms per query).

The graph is an imported model's shape of trouble: thousands of Multiplies and Adds over a few
hundred placeholders, one SiLU written as the importer leaves it (`ReorderAxes(d) *
ReorderAxes(Sigmoid(d))`) and one `a * Sigmoid(b)`. Each query explains one rule; the figures
are the medians over several runs of CPU time (the machine is shared: wall time includes waits)
and wall time, after one warm-up run (the rule's matcher compiled once). `explain` may be any
function of (rule, outputs), so an older `explain` can be timed beside it in one process.

Run: python bench/explain.py [nodes]
"""

from __future__ import annotations

import statistics
import sys
import time

import ngrules as ng
from ngrules.ir.graph import toposort
from ngrules.lang.loader import parse_rules

RULES = """
pass p
rule silu: x * Sigmoid(x) => x
rule fma: a * b + c => a
rule guarded: s @ Sum(x) if len(s.reduction_axes) == 2 => s
rule absent: Log(Exp(a)) => a
"""


def graph(nodes: int) -> list:
    """About `nodes` nodes: placeholders, then Multiplies and Adds of earlier ones, a few Sums."""
    a, b = ng.make_axis(4, "A"), ng.make_axis(3, "B")
    leaves = [ng.placeholder([a, b], name=f"p{i}") for i in range(200)]
    made = list(leaves)
    i = 0
    while len(made) < nodes - 8:
        x, y = made[-1], made[(i * 7919) % len(made)]  # the newest: no repeats
        made.append(x * y if i % 2 else x + y)
        if i % 500 == 0:
            made.append(ng.sum(made[-1], reduction_axes=[b]))
        i += 1
    d = made[-1]
    silu = ng.axes_with_order(d, [b, a]) * ng.axes_with_order(ng.sigmoid(d), [b, a])
    near = leaves[3] * ng.sigmoid(leaves[7])
    return [*made[-50:], silu, near]


def main(nodes: int = 10_000, runs: int = 5, explain=ng.explain) -> dict[str, float]:
    """The median CPU seconds of one query per rule (printed with the wall time)."""
    outputs = graph(nodes)
    count = len(toposort(outputs))
    rules = parse_rules(RULES, "bench.rules")
    medians = {}
    for rule in rules:
        explain(rule, outputs)  # warm-up: the matcher compiled once
        cpu, wall = [], []
        for _ in range(runs):
            start, start_cpu = time.perf_counter(), time.process_time()
            explain(rule, outputs)
            cpu.append(time.process_time() - start_cpu)
            wall.append(time.perf_counter() - start)
        medians[rule.name] = statistics.median(cpu)
        print(f"explain {rule.name:8s} on {count} nodes: median {medians[rule.name] * 1e3:6.1f} ms "
              f"CPU, {statistics.median(wall) * 1e3:6.1f} ms wall, over {runs} runs "
              "(target <= 100 ms)")
    return medians


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
