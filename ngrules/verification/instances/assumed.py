"""Values under a rule's `assume` clauses: inputs drawn within the promised ranges.

An assumed variable that the builder made a placeholder gets its values drawn in its range,
intersected with its op domain: every drawn value outside the range (a special value such as
1e6, or an "outside the domain" draw) is replaced by the nearest end of the range or by a value
drawn inside it. Any other node an assumption names (a named sub-pattern, a constant) is
evaluated on the drawn inputs, and an instance whose values break the promise is not used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ngrules.ir.graph import Node
from ngrules.lang.assumptions import Assumption

Domain = str  # as in `domains`
Assumed = Sequence[tuple[Assumption, Node]]  # each assumption with the node its variable is

#: Where values are drawn by default, per domain (as `domain_values` draws them).
_TYPICAL = {"real": (-2.0, 2.0), "nonzero": (-2.0, 2.0), "positive": (0.5, 2.0), "bool": (0, 1)}
#: Where a domain's values lie at all.
_EXTENT = {"positive": (np.nextafter(0.0, 1.0), math.inf)}


def assumed_nodes(assumptions: Sequence[Assumption], bound: Mapping[str, Node]) -> Assumed:
    """Each assumption with the node the builder bound its variable to."""
    return tuple((a, bound[a.name]) for a in assumptions if a.name in bound)


def _bounded(low: float, high: float) -> tuple[float, float]:
    """A finite stretch of [low, high] (2 wide from a finite end, or around 0)."""
    if math.isfinite(low) and math.isfinite(high):
        return low, high
    if math.isfinite(low):
        return low, low + 2.0
    if math.isfinite(high):
        return high - 2.0, high
    return -2.0, 2.0


def _inside(domain: Domain, low: float, high: float) -> tuple[float, float]:
    """An interval of the range where values of the domain are usually drawn; else where the
    domain meets the range; else (they do not meet: the left side is undefined) the range."""
    a, b = _TYPICAL.get(domain, _TYPICAL["real"])
    if max(a, low) <= min(b, high):
        return max(a, low), min(b, high)
    e_low, e_high = _EXTENT.get(domain, (-math.inf, math.inf))
    if max(e_low, low) <= min(e_high, high):
        return _bounded(max(e_low, low), min(e_high, high))
    return _bounded(low, high)


def confine(
    values: np.ndarray,
    rng: np.random.Generator,
    assumption: Assumption,
    domain: Domain = "real",
    dtype=np.float64,
    edges: bool = True,
) -> np.ndarray:
    """values with every element outside the assumption's range replaced: with `edges` (special
    values), half by the nearest end of the range and half by a value drawn inside it, rounded
    for readability, and a tenth of all by an end (the edge of the promise is where a rule is
    most likely wrong); without, all drawn inside (continuous, as derivatives need). The result
    is in the range once cast to dtype."""
    low, high = assumption.closed(dtype)
    v = np.asarray(values, np.float64)
    ends = [e for e in (low, high) if math.isfinite(e)]
    if edges and ends:
        v = np.where(rng.uniform(size=v.shape) < 0.1, rng.choice(ends, v.shape), v)
    outside = ~((v >= low) & (v <= high))
    if not outside.any():
        return v
    a, b = _inside(domain, low, high)
    drawn = rng.uniform(a, b, v.shape)
    if edges:
        rounded = np.round(drawn, 3)
        drawn = np.where((rounded >= a) & (rounded <= b), rounded, drawn)
        drawn = np.where(rng.uniform(size=v.shape) < 0.5, np.clip(v, low, high), drawn)
    return np.where(outside, np.clip(drawn, low, high), v)


def broken(assumed: Assumed, feeds: Mapping[Node, np.ndarray]) -> Assumption | None:
    """The first assumption whose node's values (computed from feeds) leave its range."""
    from ngrules.ir.executor import execute

    for assumption, node in assumed:
        if node.outputs is not None:
            continue  # a multi-output node has no values of its own
        if node in feeds:
            value = feeds[node]
        else:
            with np.errstate(all="ignore"):
                value = execute([node], dict(feeds), ignore_unused=True)[0]
        if not assumption.admits(value):
            return assumption
    return None


def generic_within(
    values: dict[Node, np.ndarray], assumed: Assumed, memo: Mapping[Node, Node], seed: int
) -> dict[Node, np.ndarray] | None:
    """Generic input values (those derivatives are compared at) moved into the assumed ranges;
    None if an assumption on a computed node does not hold there. `memo` maps the instance's
    nodes to the graph values is keyed by."""
    if not assumed:
        return values
    rng = np.random.default_rng(seed + 2)
    moved = [(a, memo[n]) for a, n in assumed if n in memo]
    out = dict(values)
    for a, node in moved:
        if node in out:
            domain = "positive" if (np.asarray(out[node]) > 0).all() else "real"
            out[node] = confine(out[node], rng, a, domain, node.dtype, edges=False).astype(
                node.dtype)
    return None if broken(moved, out) else out
