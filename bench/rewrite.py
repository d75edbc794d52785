"""Rewrite throughput: the rule engine vs hand-written Python passes, on the same graphs.

W1: algebraic simplification (`x*1`, `x+0`, `-(-x)`) along a long chain.
W2: batchnorm-forward fusion (the primitive subgraph -> one BatchnormFprop), repeated.

Both sides run in this process on the same immutable graph, with the cyclic GC paused for
both; each figure is the best of several runs. Run: `python bench/rewrite.py [--max 1000000]`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import ngrules as ng
from ngrules.ir.graph import Node, make_node, paused_gc, toposort
from ngrules.ir.layers import batchnorm
from ngrules.ir.values import known_scalar

SIMPLIFY = """
pass simplify
rule mul_one:  x * 1     => x
rule add_zero: x + 0     => x
rule neg_neg:  -(-x)     => x
"""

FUSION = """
pass fusion
rule bn_fprop:                     # gamma * (x - mean) / sqrt(var + eps) + beta
    Broadcast(gamma) * (xc * Broadcast(Reciprocal(Sqrt(var + Broadcast(eps: constant)))))
        + Broadcast(beta)
    where xc = x - Broadcast(Sum(x) / Broadcast(m1: constant))
    where var = Sum(Square(xc)) / Broadcast(m2: constant)
    if len(gamma.axes) == 1 and x.axes[0] == gamma.axes[0]
    => BatchnormFprop(x, gamma, beta, eps=value(eps))[0]
"""


# -- workloads ---------------------------------------------------------------------------------
def simplify_chain(n_nodes: int) -> list[Node]:
    """tanh interleaved with x*1, x+0 and -(-x): about n_nodes nodes."""
    axis = ng.make_axis(4, "A")
    x = ng.placeholder([axis], name="x")
    i = 0
    while len_estimate(i) < n_nodes:
        x = ng.tanh(x)
        x = _SIMPLIFIABLE[i % 3](x)
        i += 1
    return [x]


_SIMPLIFIABLE = (lambda x: x * 1.0, lambda x: x + 0.0, lambda x: ng.negative(ng.negative(x)))


def len_estimate(steps: int) -> int:
    return (steps * 7) // 3 + 4


def batchnorm_chain(n_nodes: int) -> list[Node]:
    """Batchnorm forward blocks built from primitives, chained through tanh."""
    c, n = ng.make_axis(8, "C"), ng.make_axis(16, "N")
    x = ng.placeholder([c, n], name="x")
    k = 0
    while 23 * k < n_nodes:
        gamma = ng.placeholder([c], name=f"g{k}")
        beta = ng.placeholder([c], name=f"b{k}")
        x = ng.tanh(batchnorm(x, gamma, beta, 1e-3))
        k += 1
    return [x]


# -- hand-written passes on the same IR --------------------------------------------------------
def _rebuild(outputs: list[Node], local: Callable[[Node], Node | None]) -> list[Node]:
    """One bottom-up sweep applying `local` at each node until it declines."""
    memo: dict[Node, Node] = {}
    for node in toposort(outputs):
        new = node.with_args(tuple([memo[a] for a in node.args])) if node.args else node
        while True:
            out = local(new)
            if out is None:
                break
            new = out
        memo[node] = new
    return [memo[o] for o in outputs]


def _simplify_local(node: Node) -> Node | None:
    op = node.op
    if op == "Multiply" or op == "Add":
        unit = 1.0 if op == "Multiply" else 0.0
        a, b = node.args
        if known_scalar(b) == unit:
            return a
        if known_scalar(a) == unit:
            return b
    elif op == "Negative" and node.args[0].op == "Negative":
        return node.args[0].args[0]
    return None


def _orders(node: Node):
    a, b = node.args
    return ((a, b), (b, a))


def _under(node: Node, op: str) -> Node | None:
    return node.args[0] if node.op == op else None


def _count_of(divide: Node, x: Node) -> bool:
    m = _under(divide.args[1], "Broadcast")
    return m is not None and known_scalar(m) == x.axes.size / divide.axes.size


def _bn_local(node: Node) -> Node | None:
    if node.op != "Add":
        return None
    for left, bb in _orders(node):
        beta = _under(bb, "Broadcast")
        if beta is None or left.op != "Multiply":
            continue
        for gb, prod in _orders(left):
            gamma = _under(gb, "Broadcast")
            if gamma is None or prod.op != "Multiply":
                continue
            for xc, rb in _orders(prod):
                found = _bn_inner(xc, rb, gamma, beta)
                if found is not None:
                    return found
    return None


def _bn_inner(xc: Node, rb: Node, gamma: Node, beta: Node) -> Node | None:
    recip = _under(rb, "Broadcast")
    if xc.op != "Subtract" or recip is None or recip.op != "Reciprocal":
        return None
    x, mb = xc.args
    mean = _under(mb, "Broadcast")
    sqrt = _under(recip, "Reciprocal")
    total = _under(sqrt, "Sqrt") if sqrt is not None else None
    if mean is None or mean.op != "Divide" or total is None or total.op != "Add":
        return None
    if _under(mean.args[0], "Sum") is not x or not _count_of(mean, x):
        return None
    for var, eb in _orders(total):
        eps = _under(eb, "Broadcast")
        if eps is None or known_scalar(eps) is None or var.op != "Divide":
            continue
        sq = _under(var.args[0], "Sum")
        if sq is None or _under(sq, "Square") is not xc or not _count_of(var, x):
            continue
        if len(gamma.axes) == 1 and x.axes[0] == gamma.axes[0]:
            fused = make_node("BatchnormFprop", (x, gamma, beta), eps=known_scalar(eps))
            return make_node("Output", (fused,), index=0)
    return None


def hand_pass(outputs: list[Node], local) -> list[Node]:
    """The hand-written pass, with the collector paused as the engine pauses it."""
    with paused_gc():
        return _rebuild(outputs, local)


# -- measurement -------------------------------------------------------------------------------
def timed(fn) -> float:
    """Seconds for one call; the result is dropped before returning, so no run finds the
    nodes an earlier one built already interned (hash-consing would flatter it)."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(name: str, build, rules, local, size: int, repeat: int) -> dict:
    outputs = build(size)
    nodes = len(toposort(outputs))
    engine = lambda: ng.rewrite(outputs, rules)  # noqa: E731
    hand = lambda: hand_pass(outputs, local)  # noqa: E731
    res = engine()
    assert res.outputs == hand(), f"{name}: engine and hand-written pass disagree"
    rewrites = len(res.trace)
    del res
    t_engine = t_hand = float("inf")
    for _ in range(repeat):  # alternate, best of each
        t_engine = min(t_engine, timed(engine))
        t_hand = min(t_hand, timed(hand))
    return {
        "workload": name, "nodes": nodes, "rewrites": rewrites,
        "engine_nps": nodes / t_engine, "hand_nps": nodes / t_hand, "ratio": t_hand / t_engine,
    }


def run(sizes: list[int], repeat: int = 3) -> list[dict]:
    simplify = ng.parse_rules(SIMPLIFY, "simplify.rules")
    fusion = ng.parse_rules(FUSION, "bn.rules")
    rows = []
    for size in sizes:
        rows.append(measure("W1 simplify", simplify_chain, simplify, _simplify_local, size, repeat))
        rows.append(measure("W2 bn fusion", batchnorm_chain, fusion, _bn_local, size, repeat))
    return rows


def report(rows: list[dict]) -> None:
    print(f"{'workload':14s} {'nodes':>9s} {'rewrites':>9s} {'engine n/s':>12s} "
          f"{'hand n/s':>12s} {'hand/engine':>12s}")
    for r in rows:
        print(f"{r['workload']:14s} {r['nodes']:9d} {r['rewrites']:9d} {r['engine_nps']:12,.0f} "
              f"{r['hand_nps']:12,.0f} {r['ratio']:12.2f}")
    for name in sorted({r["workload"] for r in rows}):
        mine = [r for r in rows if r["workload"] == name]
        if len(mine) > 1:
            first, last = mine[0], mine[-1]
            growth = (last["nodes"] / last["engine_nps"]) / (first["nodes"] / first["engine_nps"])
            print(f"{name}: time x{growth:.0f} for nodes x{last['nodes'] / first['nodes']:.0f}")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max", type=int, default=1_000_000, help="largest graph size")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [s for s in (1_000, 10_000, 100_000, 1_000_000) if s <= args.max] or [args.max]
    rows = run(sizes, args.repeat)
    report(rows)
    return rows


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
