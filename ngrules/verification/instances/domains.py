"""Value domains: which values each op input may take, and feeds drawn from them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ngrules.ir.graph import Node, make_node, toposort
from ngrules.ir.ops import OPS

Domain = str  # "real", "positive" or "nonzero", as in the op table
_STRICTNESS = {"real": 0, "nonzero": 1, "positive": 2}


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


def argument_domain(op: str, index: int, need: Domain) -> Domain:
    """The values argument `index` of op should take: the op's own domain, and enough that the
    output lands in `need` when the op keeps signs (positive under Add, nonzero under Multiply)."""
    own = OPS[op].arg_domain(index)
    if need == "real" or op == "Exp":
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
    magnitude = rng.uniform(0.5, 2.0, shape)
    if domain == "nonzero":
        magnitude *= rng.choice([-1.0, 1.0], shape)
    return magnitude.astype(dtype)


def feeds_for(
    outputs: Sequence[Node], seed: int, domains: dict[Node, Domain] | None = None
) -> dict[Node, np.ndarray]:
    """A value for every placeholder under outputs, from its domain, rounded for readability."""
    rng = np.random.default_rng(seed)
    known = placeholder_domains(outputs)
    for node, domain in (domains or {}).items():
        if node in known:
            known[node] = strictest(known[node], domain)
    return {
        node: np.round(domain_values(rng, node.axes.lengths, np.float64, d), 3).astype(node.dtype)
        for node, d in known.items()
    }


def as_float64(outputs: Sequence[Node]) -> tuple[list[Node], dict[Node, Node]]:
    """The same graph in float64 (leaves rebuilt, the rest re-inferred), and old -> new leaves."""
    memo: dict[Node, Node] = {}
    for node in toposort(outputs):
        attrs = dict(node.attrs)
        if node.op in ("Placeholder", "Variable"):
            attrs["dtype"] = np.float64
        elif node.op == "Constant":
            attrs["value"] = np.asarray(attrs["value"], np.float64)
        memo[node] = make_node(node.op, [memo[a] for a in node.args], **attrs)
    return [memo[o] for o in outputs], memo
