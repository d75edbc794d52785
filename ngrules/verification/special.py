"""Special values: every instance run on ±0, ±inf, NaN, huge, tiny and cancelling inputs.

Random draws rarely give an input of inf, NaN or 1e17 next to 1, where IEEE arithmetic parts
from the real numbers a rule is written for (`x * 0` is NaN at x = inf, `Equal(x, x)` is 0 at
NaN, `Minimum(x, 2e6)` is not x at x = 1e300). Here each input of a few instances takes every
special value (and every pair of them, for two inputs), cancelling pairs (1 beside ±1e17) and
random mixes per element; a difference judged as testing judges it (`compare`) is a
counterexample. The verifier runs this after its random instances, and the prover before any
proof: a counterexample here vetoes the proof.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Sequence

import numpy as np

from ngrules.ir.executor import compile_graph, execute
from ngrules.ir.graph import Node, toposort
from ngrules.ir.ops import OPS
from ngrules.verification.compare import absolute_tolerance, compare
from ngrules.verification.instances import Instance, as_float64, converted_feeds
from ngrules.verification.instances.assumed import broken
from ngrules.verification.verdicts import Counterexample

INF, NAN = float("inf"), float("nan")
#: Values where IEEE floats part from the reals: signed zeros, ones, infinities, NaN, the
#: largest and smallest magnitudes, and values on the edge of cancelling (1e17 + 1 == 1e17).
SPECIALS = (0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 1e308, -1e308, 5e-324, -5e-324,
            1e-300, 1e17, -1e17, 4e6, 0.5)
#: The finite ones, mixed per element (an infinity in one element of a reduction hides where
#: another element ran out of range).
FINITE = tuple(v for v in SPECIALS if np.isfinite(v))
#: Inputs beside each other that cancel in float64 (a + b - b is not a).
PAIRS = ((1.0, 1e17), (1.0, -1e17), (1e17, 1.0), (-1e17, 1.0), (1e17, -1e17), (3.0, 1e16))
#: Ordinary magnitudes (`magnitude_feeds`): scales of the instance's own inputs, shifts
#: away from 0 (keeping signs), and per-element factors mixed in one input.
SCALES = (1e3, 1e-12, 1e8, 1e150, 1e-150)
SHIFTS = (1e8,)
SPREAD = (1.0, 1e8, 1e-8, 1e16)
#: A large value put at two places of one input with opposite signs, in MAX_PAIRS placings.
CANCELLING, MAX_PAIRS = 1e17, 12
#: Feeds tried per instance at most, instances per rule, and full comparisons per rule (of
#: feeds whose results do not plainly agree): counts, so a verdict never depends on the
#: machine's load. BUDGET (seconds per rule) is only a safety net, far above what they take.
MAX_FEEDS, MAX_INSTANCES, MAX_COMPARED, BUDGET = 300, 4, 250, 30.0
#: Rounding allowed on the random mixes, relative to the largest term a reduction adds: a sum
#: of 1e17, 0.5 and -1e17 in another order (`Σ a·y => a·Σ y`) is rounding, not a wrong rule
#: (about 50 units in the last place of float64; uniform feeds and pairs are judged exactly).
REASSOCIATION = 1e-14


def _inputs(inst: Instance) -> list[Node]:
    """The float inputs of the instance, in a fixed order."""
    return sorted((n for n in inst.feeds if np.asarray(inst.feeds[n]).dtype.kind == "f"),
                  key=lambda n: n.name)


def _assignments(count: int, rng: np.random.Generator) -> Iterator[tuple]:
    """Tuples of one value per input: every special value for each, every pair for two
    inputs (a random sample for more), and cancelling pairs on each two inputs."""
    if count <= 2:
        yield from itertools.product(SPECIALS, repeat=count)
    else:
        for _ in range(MAX_FEEDS // 2):
            yield tuple(rng.choice(SPECIALS, count))
    for i, j in itertools.permutations(range(count), 2):
        for a, b in PAIRS:
            row = [1.0] * count
            row[i], row[j] = a, b
            yield tuple(row)


def special_feeds(inst: Instance, seed: int = 0) -> Iterator[dict[Node, np.ndarray]]:
    """Feeds of special values for the instance: uniform per input, then mixed per element."""
    for feeds, _ in _tagged_feeds(inst, seed):
        yield feeds


def _tagged_feeds(inst: Instance, seed: int, ieee: bool = True, ordinary: bool = False
                  ) -> Iterator[tuple[dict[Node, np.ndarray], bool]]:
    """The special feeds, each with whether it mixes values per element; the ordinary
    magnitudes only for IEEE (they are float64's traps, not the reals'), and only they
    with `ordinary`."""
    rng = np.random.default_rng(seed)
    inputs = _inputs(inst)
    if not inputs:
        return
    with np.errstate(all="ignore"):
        if ieee:
            yield from ((feeds, False) for feeds in magnitude_feeds(inst, inputs, rng))
        if ordinary:
            return
        for row in itertools.islice(_assignments(len(inputs), rng), MAX_FEEDS):
            yield {**inst.feeds, **{n: _full(n, v) for n, v in zip(inputs, row)}}, False
        for _ in range(MAX_FEEDS // 8):
            yield {**inst.feeds, **{n: rng.choice(FINITE, n.axes.lengths).astype(n.dtype)
                                    for n in inputs}}, True


def magnitude_feeds(inst: Instance, inputs: Sequence[Node], rng: np.random.Generator
                    ) -> Iterator[dict[Node, np.ndarray]]:
    """The instance's own inputs at large and small ordinary magnitudes, where float64 parts
    from the reals without any special value: all scaled alike (|x| near 1e3 overflows
    `Exp`, 1e150 a product, 1e-12 vanishes beside 1), each input alone for two inputs,
    shifted (1e8 + x: `E[x²] - E[x]²` cancels), and spread per element over very different
    sizes (a sum in another order rounds differently). Scales are positive: signs, and so
    op domains, are kept."""
    own = {n: np.asarray(inst.feeds[n], np.float64) for n in inputs}

    def made(change) -> dict[Node, np.ndarray]:
        return {**inst.feeds, **{n: change(n, v).astype(n.dtype) for n, v in own.items()}}

    for scale in SCALES:
        yield made(lambda n, v, s=scale: v * s)
        if len(inputs) == 2:
            for alone in inputs:
                yield made(lambda n, v, s=scale, a=alone: v * s if n is a else v)
    for shift in SHIFTS:
        yield made(lambda n, v, s=shift: v + np.where(np.signbit(v), -s, s))
    for _ in range(4):
        yield made(lambda n, v: v * rng.choice(SPREAD, v.shape))
    for node in inputs:  # ±1e17 at two places of one input: a sum in another order keeps
        for pair in _cancelling_places(own[node].shape, rng):  # the small terms it loses
            flat = own[node].ravel().copy()
            flat[list(pair)] = (CANCELLING, -CANCELLING)
            yield {**made(lambda n, v: v), node: flat.reshape(own[node].shape).astype(node.dtype)}


def _cancelling_places(shape: tuple, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Up to MAX_PAIRS pairs of flat places of an array of `shape`: every pair of a small
    array; else, in turn, two places a row apart along one axis (the axes taken in turn: a
    reduction over that axis adds them into one result, where two places drawn at random in
    a large array mostly land in different results) and two places drawn at random."""
    size = int(np.prod(shape, dtype=np.int64))
    if size * (size - 1) <= MAX_PAIRS:
        return list(itertools.permutations(range(size), 2))
    axes = [k for k, n in enumerate(shape) if n > 1]
    pairs: list[tuple[int, int]] = []
    for k in range(MAX_PAIRS):
        if k % 2 == 0:
            axis = axes[(k // 2) % len(axes)]
            first = [int(rng.integers(n)) for n in shape]
            second = list(first)
            second[axis] = (first[axis] + 1 + int(rng.integers(shape[axis] - 1))) % shape[axis]
            pair = (int(np.ravel_multi_index(first, shape)),
                    int(np.ravel_multi_index(second, shape)))
        else:
            a, b = rng.choice(size, 2, replace=False)
            pair = (int(a), int(b))
        pairs.append(pair)
    return pairs


def _largest_term(graphs: Sequence[Sequence[Node]], feeds) -> float:
    """The largest term a reduction of the graphs adds, bounded by the product of its float
    operands' largest finite magnitudes (a Dot's terms are products); 0 without one."""
    largest = 0.0
    for outputs in graphs:
        nodes = [n for n in toposort(outputs) if n.outputs is None]
        adding = [n for n in nodes if not any(OPS[n.op].has(t) for t in _NOT_ADDING)]
        if not adding:
            continue
        with np.errstate(all="ignore"):
            values = dict(zip(nodes, execute(nodes, feeds, ignore_unused=True)))
            for node in adding:
                sizes = [np.abs(np.asarray(values[a], np.float64)) for a in node.args
                         if a in values and np.asarray(values[a]).dtype.kind == "f"]
                sizes = [float(np.max(np.where(np.isfinite(v), v, 0.0), initial=0.0))
                         for v in sizes]
                largest = max(largest, float(np.prod(sizes)) if sizes else 0.0)
    return largest


#: Ops that add no terms up: elementwise ops (a cancellation there is judged exactly), views
#: and leaves.
_NOT_ADDING = ("elementwise", "view", "leaf")


def _full(node: Node, value: float) -> np.ndarray:
    return np.full(node.axes.lengths, value).astype(node.dtype)


def _nan_from_input(outputs: Sequence[Node], feeds) -> bool:
    """Whether the first NaN of the graph comes from an op on a non-finite input itself
    (`x * 0` at x = inf), not on an infinity computed from one (`exp(-x) * 0` at x = -inf)."""
    nodes = [n for n in toposort(outputs) if n.outputs is None]
    with np.errstate(all="ignore"):
        values = dict(zip(nodes, execute(nodes, feeds, ignore_unused=True)))
    for node in nodes:
        args = [values.get(a) for a in node.args]
        if not node.args or not np.isnan(values[node]).any():
            continue
        if any(a is None or np.isnan(a).any() for a in args):
            return False  # a NaN passed on
        return any(a.op in ("Placeholder", "Variable") and not np.isfinite(values[a]).all()
                   for a in node.args if a in values)
    return False


class _Agreement:
    """Whether both sides give the same results (within tolerance, NaN equal to NaN) on a
    feed: one program per side, compiled once, where `compare` rebuilds and compiles both
    graphs for each feed. Most special feeds agree; only the others are compared in full."""

    def __init__(self, before: Sequence[Node], after: Sequence[Node], rtol: float,
                 atol: float, ieee: bool = True):
        graphs, self.memo = as_float64(list(before) + list(after))
        self.before = compile_graph(graphs[: len(before)])
        self.after = compile_graph(graphs[len(before):])
        self.rtol, self.atol, self.ieee = rtol, atol, ieee

    def __call__(self, feeds) -> bool:
        feeds64 = converted_feeds(feeds, self.memo)
        try:
            with np.errstate(all="ignore"):
                left = self.before.run(feeds64, ignore_unused=True)
                right = self.after.run(feeds64, ignore_unused=True)
                return all(self._close(np.asarray(a, np.float64), np.asarray(b, np.float64))
                           for a, b in zip(left, right))
        except Exception:  # noqa: BLE001 - whatever it is, the full comparison reports it
            return False

    def _close(self, a: np.ndarray, b: np.ndarray) -> bool:
        """Within the tolerance `compare` allows at the least (no floor): agreeing here, the
        full comparison would agree too."""
        if a.shape != b.shape:
            return False
        if np.array_equal(a, b, equal_nan=True):  # most feeds: no tolerance to work out
            return True
        atol = absolute_tolerance(a, self.atol, self.ieee)
        return bool(np.isclose(b, a, rtol=self.rtol, atol=atol, equal_nan=True).all())


def _spread(inst: Instance) -> int:
    """How many of the instance's axes are longer than 1: an axis of length 1 hides an order
    (a sum over a, then over b, is the sum over both when either is of length 1)."""
    return len({a for n in toposort(inst.outputs) for a in n.axes if a.length > 1})


def widest(kept: list[Instance], inst: Instance, count: int = 2) -> list[Instance]:
    """The `count` instances of `kept` and `inst` with the most axes longer than 1 (the
    builder draws many of length 1), for the ordinary magnitudes besides the first drawn."""
    return sorted([*kept, inst], key=_spread, reverse=True)[:count]


def special_counterexample(
    instances: Sequence[Instance], semantics: str = "strict", rtol: float = 1e-6,
    atol: float = 1e-9, budget: float = BUDGET, seed: int = 0, floats: str = "ieee",
    varied: Sequence[Instance] = (),
) -> Counterexample | None:
    """The first special-value feed on which an instance's rewrite changes results (values
    within the rule's assumptions only), as a counterexample; None if there is none. Smaller
    instances first; after MAX_COMPARED full comparisons (or, as a safety net, `budget`
    seconds) the feeds left are not tried. `seed` seeds the random mixes of special values.
    `floats`: "ieee" (no slack for reassociation on the mixes) or "reals" (`compare`).
    `varied` instances (`widest`) are tried after them on the ordinary magnitudes only: a
    sum in another order shows only where the axes it orders are longer than 1."""
    ieee = floats == "ieee"
    deadline, compared = time.perf_counter() + budget, 0
    chosen = sorted(instances, key=lambda i: len(toposort(i.outputs)))[:MAX_INSTANCES]
    tried = [(i, False) for i in chosen] + [(i, True) for i in varied
                                                if all(i is not c for c in chosen)]
    for inst, ordinary in tried:
        if inst.after is None:
            continue
        after = inst.after if inst.stop == "fixpoint" else inst.step
        same = _Agreement(inst.outputs, after, rtol, atol, ieee)
        for feeds, mixed in _tagged_feeds(inst, seed, ieee, ordinary):
            if time.perf_counter() > deadline or compared >= MAX_COMPARED:
                return None
            if inst.assumed and broken(inst.assumed, feeds) is not None:
                continue
            if same(feeds):
                continue  # the results agree: nothing for the full comparison to judge
            slack = 0.0
            if mixed and not ieee:
                slack = REASSOCIATION * _largest_term((inst.outputs, after), feeds)
            infinite = any((~np.isfinite(v)).any() for v in feeds.values()
                           if np.asarray(v).dtype.kind == "f")
            sem = semantics
            if infinite and not _nan_from_input(inst.outputs, feeds):
                sem = "refine"  # a NaN of computed infinities (exp(inf) * 0): out of range
            compared += 1
            result = compare(inst.outputs, after, feeds, rtol, atol + slack, sem, infinite,
                             floats)
            if result.problem is not None:
                return Counterexample(inst.rule, inst.outputs, feeds,
                                      f"{result.problem} (special values)", after,
                                      result.expected, result.got)
    return None
