"""Which instances a proof over the reals also proves in IEEE floats: those whose every op is
exact there (it never rounds), so that floats compute what the reals do.

Ops that move, select, compare or negate values are exact; so are the identities a rule
removes: a product or quotient by a constant of ±1, a sum or difference with a constant 0
(`x * 1`, `x / -1`, `x + 0`: exact for every float, inf and NaN too; -0 + 0 is +0, equal to
-0), and a sum over axes of total length 1 (one term: the term itself). IEEE's corners (inf,
NaN, ±0) are judged besides by the special values, which run before any proof and veto it.
"""

from __future__ import annotations

import numpy as np

from ngrules.ir.graph import Node, toposort
from ngrules.ir.ops import OPS
from ngrules.verification.instances import Instance

#: Ops exact in IEEE floats: they move, select, compare or negate values, never round.
EXACT_OPS = frozenset({"Placeholder", "Variable", "Constant", "Slice", "Concat", "Reverse",
                       "Negative", "Absolute", "Sign", "Maximum", "Minimum", "Max", "Min",
                       "Greater", "Less", "GreaterEqual", "LessEqual", "Equal", "NotEqual",
                       "Select", "And", "Or", "Xor", "Not"})
#: Arithmetic that is exact when an operand (at these positions) is a constant of these values.
_IDENTITIES = {"Multiply": ((0, 1), (1.0, -1.0)), "Divide": ((1,), (1.0, -1.0)),
               "Add": ((0, 1), (0.0,)), "Subtract": ((1,), (0.0,))}


def _constant(node: Node) -> np.ndarray | None:
    """The values of a constant, seen through views (a broadcast scalar); None otherwise."""
    while OPS[node.op].has("view") and node.args:
        node = node.args[0]
    return np.asarray(node.attrs["value"]) if node.op == "Constant" else None


def _identity(node: Node) -> bool:
    """A product or quotient by ±1, or a sum or difference with 0: exact in floats."""
    positions, values = _IDENTITIES.get(node.op, ((), ()))
    for i in positions:
        value = _constant(node.args[i])
        if value is not None and value.size and np.isin(value, values).all():
            return True
    return False


def _one_term(node: Node) -> bool:
    """A sum or product whose every result is one element of its operand (a reduction over
    axes of total length 1): that element itself."""
    return node.op in ("Sum", "Prod") and node.args[0].axes.size == node.axes.size


def exact_node(node: Node) -> bool:
    """Whether the node computes in floats exactly what it computes over the reals."""
    if node.op in EXACT_OPS or OPS[node.op].has("view") or _one_term(node):
        return True
    if node.op == "Relu":
        return float(node.attrs.get("slope", 0.0)) == 0.0
    return node.dtype.kind == "f" and _identity(node)


def exact(instances: list[Instance]) -> bool:
    """Whether every op of every instance, before and after, is exact in IEEE floats: a proof
    over the reals then holds for floats."""
    for inst in instances:
        after = inst.after if inst.stop == "fixpoint" else inst.step
        if not all(exact_node(n) for n in toposort(list(inst.outputs) + list(after or ()))):
            return False
    return True
