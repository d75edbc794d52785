"""Which rules a proof at rank 0 covers at every shape: elementwise ops only, guards on
dtypes only, and a replacement whose new nodes act alike at every rank."""

from __future__ import annotations

from ngrules.ir.graph import toposort
from ngrules.ir.ops import OPS
from ngrules.lang.rules import Rule
from ngrules.lang.syntax import EAttr, EBinary, EBool, EStr, EUnary, EVar, Guard, PVar, walk
from ngrules.verification.instances import Instance
from ngrules.verification.prove.groups import POSITIONAL


def pointwise(rule: Rule) -> bool:
    """Only elementwise ops and untyped variables: proved at rank 0, proved for all shapes."""
    for p in walk(rule.roots):
        op = getattr(p, "op", None)
        if op is not None and not OPS[op].has("elementwise"):
            return False
        if isinstance(p, PVar) and p.kind is not None:
            return False
    if POSITIONAL.search(rule.source or "x["):  # a builder may skip a node at some ranks
        return False
    return all(isinstance(c, Guard) and _dtypes_only(c.expr) for c in rule.clauses)


def _dtypes_only(expr) -> bool:
    """A guard that reads dtypes only (`x.dtype == m.dtype`): the same at every shape."""
    if isinstance(expr, EAttr):
        return expr.name == "dtype" and isinstance(expr.obj, EVar)
    if isinstance(expr, EBinary):
        return expr.op in ("==", "!=", "and", "or") and _dtypes_only(expr.left) \
            and _dtypes_only(expr.right)
    if isinstance(expr, EUnary):
        return expr.op == "not" and _dtypes_only(expr.operand)
    return isinstance(expr, EStr | EBool)


def pointwise_after(inst: Instance) -> bool:
    """The replacement's new nodes elementwise ops, leaves and broadcast scalar constants: a
    reduction, a view or a slice in it acts differently at rank 0 than above (`Exp(x) =>
    broadcast(Exp(sum(x, ...)), x.axes)` holds at rank 0 only)."""
    after = inst.after if inst.stop == "fixpoint" else inst.step
    before = set(toposort(inst.outputs))
    for node in (n for n in toposort(after) if n not in before):
        op = OPS[node.op]
        scalar_broadcast = node.op == "Broadcast" and not node.args[0].axes \
            and node.args[0].op == "Constant"
        if not (op.has("elementwise") or op.has("leaf") or scalar_broadcast):
            return False
    return True
