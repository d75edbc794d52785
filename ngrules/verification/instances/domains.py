"""Value domains: which values each op input may take, and feeds drawn from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ngrules.ir.graph import Node, make_node, toposort
from ngrules.ir.ops import OPS
from ngrules.lang.assumptions import Assumption
from ngrules.verification.instances.assumed import confine

Domain = str  # "real", "positive" or "nonzero", as in the op table
_STRICTNESS = {"real": 0, "nonzero": 1, "positive": 2, "bool": 3}  # bool: a mask


# -- value domains ------------------------------------------------------------------------------
def strictest(a: Domain, b: Domain) -> Domain:
    return a if _STRICTNESS[a] >= _STRICTNESS[b] else b


#: Ops whose output is positive when their arguments are (so a positive need passes down).
_VIEWS = ("Broadcast", "ReorderAxes", "Transpose", "Flatten", "Unflatten", "Slice", "Concat")
_KEEPS_POSITIVE = frozenset(
    ("Add", "Multiply", "Divide", "Maximum", "Minimum", "Sum", "Max", "Min", "Prod", "Dot")
    + ("DotLowDimension", "Sqrt", "Reciprocal")
    + _VIEWS
)
#: Ops whose output is nonzero when their arguments are.
_KEEPS_NONZERO = frozenset(
    ("Multiply", "Divide", "Reciprocal", "Negative", "Square", "Prod") + _VIEWS
)


def argument_domain(op: str, index: int, need: Domain, push: bool = True) -> Domain:
    """The values argument `index` of op should take: the op's own domain, and (with `push`)
    enough that the output lands in `need` when the op keeps signs (positive under Add, nonzero
    under Multiply). Without push, only the op's own domain: an argument of `Sqrt(x * x)` may
    be negative."""
    own = OPS[op].arg_domain(index)
    if need == "real" or op == "Exp" or not push:
        return own
    if need == "nonzero" and op in _KEEPS_NONZERO or op == "Square":
        return strictest(own, "nonzero")
    return strictest(own, "positive") if op in _KEEPS_POSITIVE else own


def placeholder_domains(outputs: Sequence[Node]) -> dict[Node, Domain]:
    """For each placeholder, the strictest domain any of its users asks of it directly."""
    domains: dict[Node, Domain] = {}
    for node in toposort(outputs):
        if node.op == "Placeholder":
            domains.setdefault(node, "real")
        for i, arg in enumerate(node.args):
            if arg.op == "Placeholder":
                domains[arg] = strictest(domains.get(arg, "real"), OPS[node.op].arg_domain(i))
    return domains


def domain_values(rng: np.random.Generator, shape, dtype, domain: Domain) -> np.ndarray:
    """Random values in a domain, kept away from zero where the domain asks it."""
    if domain == "real":
        return rng.uniform(-2.0, 2.0, shape).astype(dtype)
    if domain == "bool":
        return (rng.uniform(size=shape) < 0.5).astype(dtype)
    magnitude = rng.uniform(0.5, 2.0, shape)
    if domain == "nonzero":
        magnitude *= rng.choice([-1.0, 1.0], shape)
    return magnitude.astype(dtype)


#: Special values per domain: zeros of both signs, ones, tiny and huge magnitudes, the domain's
#: edges (zero itself, where an op is undefined: strict semantics asks the rewrite to keep the
#: NaN or infinity it gives there; the smallest positive, the nonzero closest to zero).
SPECIAL = {
    "real": (0.0, -0.0, 1.0, -1.0, 1e-7, -1e-7, 1e6, -1e6),
    "positive": (0.0, 1e-7, 1.0, 1e6, 2.0),
    "nonzero": (0.0, 1e-7, -1e-7, 1.0, -1.0, 1e6, -1e6),
}


def special_values(
    rng: np.random.Generator, shape, domain: Domain, ties: np.ndarray
) -> np.ndarray:
    """Values in a domain with special values weighted in: about a third from SPECIAL, a third
    from `ties` (magnitudes shared by every input of the instance, so that maxima tie and
    differences vanish), the rest continuous."""
    base = np.round(domain_values(rng, shape, np.float64, domain), 3)
    pick = rng.uniform(0.0, 1.0, shape)
    special = rng.choice(np.array(SPECIAL[domain]), shape)
    tied = rng.choice(ties, shape)
    if domain == "real" or domain == "nonzero":
        tied = tied * rng.choice([-1.0, 1.0], shape)
    return np.where(pick < 0.3, special, np.where(pick < 0.6, tied, base))


def feeds_for(
    outputs: Sequence[Node],
    seed: int,
    domains: dict[Node, Domain] | None = None,
    special: bool = False,
    ranges: Mapping[Node, Assumption] | None = None,
) -> dict[Node, np.ndarray]:
    """A value for every placeholder under outputs, from its domain, rounded for readability;
    with `special`, special values and ties weighted in (`special_values`); a placeholder in
    `ranges` (an `assume`d variable) keeps within its range (`assumed.confine`)."""
    rng = np.random.default_rng(seed)
    known = placeholder_domains(outputs)
    for node, domain in (domains or {}).items():
        if node in known:
            known[node] = strictest(known[node], domain)
    ties = np.round(rng.uniform(0.5, 2.0, 2), 3)
    feeds = {}
    for node, d in known.items():
        if special:
            if rng.uniform() < 0.2:  # outside the domain: the left side is undefined there
                d = "real"
            value = special_values(rng, node.axes.lengths, d, ties)
        else:
            value = np.round(domain_values(rng, node.axes.lengths, np.float64, d), 3)
        if ranges and node in ranges:
            value = confine(value, rng, ranges[node], d, node.dtype, edges=special)
        feeds[node] = value.astype(node.dtype)
    return feeds


def as_float64(
    outputs: Sequence[Node], dtype=np.float64
) -> tuple[list[Node], dict[Node, Node]]:
    """The same graph with its float leaves in `dtype` (float64 unless given; the rest
    re-inferred, integer and bool leaves kept), and old -> new nodes."""
    memo: dict[Node, Node] = {}
    for node in toposort(outputs):
        attrs = dict(node.attrs)
        if node.op in ("Placeholder", "Variable") and node.dtype.kind == "f":
            attrs["dtype"] = np.dtype(dtype)
        elif node.op == "Constant" and node.dtype.kind == "f":
            attrs["value"] = np.asarray(attrs["value"], dtype)
        memo[node] = make_node(node.op, [memo[a] for a in node.args], **attrs)
    return [memo[o] for o in outputs], memo


def converted_feeds(feeds: Mapping[Node, np.ndarray], memo: Mapping[Node, Node]) -> dict:
    """Feeds for the nodes of `as_float64`'s graph, each in its node's dtype."""
    return {memo[k]: np.asarray(v).astype(memo[k].dtype) for k, v in feeds.items() if k in memo}
