"""Commutative matching costs about what ordered matching costs (issue 37, F10).

One graph holds, for each k in 0..8, `--copies` trees of one shape: a balanced tree of 15
binary ops, the first k of them in breadth-first order `Multiply` (commutative) and the rest
`Subtract`, over 16 leaves of their own (k = 7: a product tree of depth 3 over 8 differences,
2**7 orders per match before issue 37).
Rule k is that shape with a name at every leaf and a guard false at every match; every rule
is applied to the whole graph (each meets every tree: it matches its own shape and fails on the
others' ops); with `--graph own`, rule k meets as many trees of its own shape only (every
tree a match whose guard is false: the hardest case). The rules take turns in each repeat
(CPU time, medians); the ratio is rule k's time over rule 0's. Target: <= 1.5 for every k <= 8.

Two guards: `root` reads only the matched root (`size(r)`), `leaf` reads the first leaf's name
(the commutative ops above it keep both orders: at most 2**4 orders per tree).
Run: `python bench/commutative.py [--copies 200] [--repeat 5] [--guard root,leaf]
[--graph mixed,own]`.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import ngrules as ng

C = ng.make_axis(2, "C")
OPS = 15  # a balanced tree of depth 4; the first k (k <= 8) in breadth-first order commute
KS = range(9)


def _ops(k: int) -> list[str]:
    return ["Multiply"] * k + ["Subtract"] * (OPS - k)


def _shape(k: int, leaf, op, i: int = 0):
    """The tree of shape k: op(name, a, b) at each of the 15 ops, leaf() at each leaf."""
    if i >= OPS:
        return leaf()
    return op(_ops(k)[i], _shape(k, leaf, op, 2 * i + 1), _shape(k, leaf, op, 2 * i + 2))


_BUILD = {"Multiply": ng.multiply, "Subtract": ng.subtract}


def graph(copies: int, only: int | None = None) -> list:
    """copies trees of each shape, or (`only`) as many trees of that one shape."""
    names = itertools.count()
    shapes = KS if only is None else [only] * len(KS)
    return [
        _shape(k, lambda: ng.placeholder([C], name=f"p{next(names)}"),
               lambda name, a, b: _BUILD[name](a, b))
        for _ in range(copies) for k in shapes
    ]


def rule(k: int, guard: str) -> ng.RuleSet:
    names = itertools.count()
    infix = {"Multiply": "*", "Subtract": "-"}
    pattern = _shape(k, lambda: f"v{next(names)}", lambda n, a, b: f"({a} {infix[n]} {b})")
    test = {"root": "size(r) > 1000000", "leaf": "size(v0) > 1000000"}[guard]
    return ng.parse_rules(f"rule r{k}: r @ {pattern} if {test} => r", f"k{k}.rules")


def measure(copies: int, repeat: int, guard: str, own: bool) -> dict[int, float]:
    """Rule k's median CPU time on the mixed graph, or (own) on the graph of its own shape."""
    mixed = graph(copies)
    graphs = {k: graph(copies, k) if own else mixed for k in KS}
    rules = {k: rule(k, guard) for k in KS}
    times: dict[int, list[float]] = {k: [] for k in rules}
    for _ in range(repeat):
        for k, rs in rules.items():
            start = time.process_time()
            result = ng.rewrite(graphs[k], rs)
            times[k].append(time.process_time() - start)
            assert result.fired() == {}
    return {k: statistics.median(t) for k, t in times.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--guard", default="root,leaf")
    ap.add_argument("--graph", default="mixed,own")
    args = ap.parse_args(argv)
    nodes = len(ng.ir.graph.toposort(graph(args.copies)))
    print(f"{nodes} nodes, {len(KS) * args.copies} trees, CPU time, median of {args.repeat}")
    for where in args.graph.split(","):
        for guard in args.guard.split(","):
            found = measure(args.copies, args.repeat, guard, where == "own")
            print(f"{where} graph, guard reads {guard}: " + "  ".join(
                f"k={k} {t * 1e3:.1f} ms ({t / found[0]:.2f})" for k, t in found.items()))


if __name__ == "__main__":
    main()
