"""What a pattern element means at one node, shared by the compiled and reference matchers:
literal tests in the node's dtype, typed-variable kinds, which ops commute."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ngrules.errors import RuleError
from ngrules.ir.graph import UNKNOWN, Node
from ngrules.ir.ops import OPS
from ngrules.ir.values import known_scalar
from ngrules.lang.kinds import KINDS

Bindings = dict[str, Any]
Cont = Callable[[Bindings], Any]
Matcher = Callable[[Node, Bindings, Cont], Any]

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)


def literal_matches(value: float, node: Node) -> bool:
    """Does node hold `value` everywhere, compared in the node's dtype?"""
    return literal_is(node, rounded(value, F32), float(value), rounded(value, F16))


#: Ops whose nodes never hold a known value (neither a Constant nor a view): a node just
#: rebuilt by a walk has no cached value yet, and most are of these ops. Ops are registered
#: once, so an op's traits never change.
VALUELESS: set[str] = set()


def literal_is(node: Node, as_f32: float, as_f64: float, as_f16: float | None = None) -> bool:
    """The literal test with the value pre-rounded to each dtype (0.1 in float32 is not 0.1;
    a float16 node compares with `as_f16`, the value rounded to float16)."""
    known = node._scalar
    if known is UNKNOWN:
        op = node.op
        if op in VALUELESS:
            return False
        known = known_scalar(node)
        if known is None and op != "Constant" and not OPS[op].has("view"):
            VALUELESS.add(op)
    if known is None:
        return False
    if node.dtype is F16:
        return known == (rounded(as_f64, F16) if as_f16 is None else as_f16)
    return known == (as_f32 if node.dtype is F32 else as_f64)


def rounded(value: float, dtype) -> float:
    with np.errstate(over="ignore"):  # 1e6 is inf in float16
        return float(np.asarray(value, dtype=dtype))


def kind_predicate(kind: str | None) -> Callable[[Node], bool] | None:
    """The test a typed variable applies: an op name or a kind from `ngrules.kinds`."""
    if kind is None:
        return None
    if kind in OPS:
        return lambda node: node.op == kind
    return KINDS[kind]


#: How many argument orders of commutative ops one match at one node may try: a balanced
#: product tree of depth 5 whose guard reads every name has 2**31 (issue 37, F10).
MAX_ORDERS = 100_000


def too_many_orders(span, node: Node) -> None:
    """Raise the located error that ends a match trying more than MAX_ORDERS orders."""
    raise RuleError(
        f"matching this pattern at one {node.op} node tried more than {MAX_ORDERS:,} argument "
        "orders of its commutative ops; split the rule, or let its guards read fewer of the "
        "names under them (a commutative op whose operands are alike and unread is tried in "
        "one order)",
        span,
    )


def swaps(p) -> bool:
    """Does the matcher try this op's arguments in both orders?"""
    return is_commutative(p.op) and not p.one_order and not p.optional


def is_commutative(op: str) -> bool:
    opdef = OPS.get(op)
    return opdef is not None and opdef.has("commutative") and opdef.arity == 2


def same_type(a: Node, b: Node) -> bool:
    """Same axes (names, lengths, order), dtype and outputs: a valid stand-in."""
    if a.outputs is not None or b.outputs is not None:
        return a.outputs == b.outputs
    if a.dtype is not b.dtype and a.dtype != b.dtype:
        return False
    return a.axes is b.axes or (a.axes == b.axes and a.axes.lengths == b.axes.lengths)
