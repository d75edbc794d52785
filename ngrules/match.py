"""Pattern matching: patterns compiled to closures, and a reference interpreter as their twin.

Compiled matchers are in continuation-passing style: `m(node, b, k)` tries to match `node`,
extends the bindings dict `b`, and calls `k(b)` for each way it matches, returning the first
non-None result of `k` (undoing its bindings otherwise). Backtracking through commutative
argument orders, optional wrappers and repeated variables falls out of that: a later failure
simply returns None to the earlier choice point. Nothing recurses on graph depth, only on
pattern depth.

Semantics (identical in both matchers):
- a variable binds any node of its kind; a second use must be the same node; `_` binds nothing;
- `name @ p` binds the node p matched; every use of the name is one node;
- a literal matches a node known to hold that value everywhere (through views);
- `Op?(p)` tries p under an `Op` first, then p on the node itself;
- a commutative op tries its arguments in order, then swapped.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .graph import Node
from .ops import OPS
from .syntax import PLit, PNamed, POp, PVar
from .values import scalar_value

Bindings = dict[str, Any]
Cont = Callable[[Bindings], Any]
Matcher = Callable[[Node, Bindings, Cont], Any]

_scalars: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_MISSING = object()


def cached_scalar(node: Node) -> float | None:
    """`scalar_value` memoised per node (constants are immutable)."""
    value = _scalars.get(node, _MISSING)
    if value is _MISSING:
        value = scalar_value(node)
        _scalars[node] = value
    return value


def literal_matches(value: float, node: Node) -> bool:
    """Does node hold `value` everywhere, compared in the node's dtype?"""
    known = cached_scalar(node)
    return known is not None and known == float(np.asarray(value, dtype=node.dtype))


def kind_predicate(kind: str | None) -> Callable[[Node], bool] | None:
    """The test a typed variable applies: an op name or a kind from `ngrules.kinds`."""
    if kind is None:
        return None
    if kind in OPS:
        return lambda node: node.op == kind
    from .kinds import KINDS

    return KINDS[kind]


def is_commutative(op: str) -> bool:
    opdef = OPS.get(op)
    return opdef is not None and opdef.has("commutative") and opdef.arity == 2


# -- compiled matchers ---------------------------------------------------------------------------
def compile_pattern(p) -> Matcher:
    """A CPS matcher for one pattern."""
    if isinstance(p, PVar):
        return _compile_var(p)
    if isinstance(p, PLit):
        return _compile_lit(p)
    if isinstance(p, PNamed):
        return _compile_named(p)
    if isinstance(p, POp):
        return _compile_op(p)
    raise TypeError(f"not a pattern: {p!r}")


def _compile_var(p: PVar) -> Matcher:
    name, ok = p.name, kind_predicate(p.kind)
    if name == "_":
        if ok is None:
            return lambda node, b, k: k(b)
        return lambda node, b, k: k(b) if ok(node) else None

    def match(node, b, k):
        if ok is not None and not ok(node):
            return None
        bound = b.get(name)
        if bound is not None:
            return k(b) if bound is node else None
        b[name] = node
        result = k(b)
        del b[name]
        return result

    return match


def _compile_lit(p: PLit) -> Matcher:
    value = p.value
    return lambda node, b, k: k(b) if literal_matches(value, node) else None


def _compile_named(p: PNamed) -> Matcher:
    name, inner = p.name, compile_pattern(p.pattern)

    def match(node, b, k):
        bound = b.get(name)
        if bound is not None:
            return k(b) if bound is node else None

        def bind(b):
            b[name] = node
            result = k(b)
            del b[name]
            return result

        return inner(node, b, bind)

    return match


def _compile_op(p: POp) -> Matcher:
    op, args = p.op, [compile_pattern(a) for a in p.args]
    arity = len(args)
    if p.optional:
        inner = args[0]

        def optional(node, b, k):
            if node.op == op and len(node.args) == 1:
                result = inner(node.args[0], b, k)
                if result is not None:
                    return result
            return inner(node, b, k)

        return optional
    if arity == 0:
        return lambda node, b, k: k(b) if node.op == op and not node.args else None
    if arity == 1:
        (m0,) = args
        return lambda node, b, k: m0(node.args[0], b, k) if node.op == op else None
    if arity == 2:
        return _compile_binary(op, args[0], args[1], is_commutative(op))
    seq = _sequence(args)
    return lambda node, b, k: (
        seq(node.args, b, k) if node.op == op and len(node.args) == arity else None
    )


def _compile_binary(op: str, m0: Matcher, m1: Matcher, commutative: bool) -> Matcher:
    def in_order(x, y, b, k):
        return m0(x, b, lambda b: m1(y, b, k))

    if not commutative:

        def match(node, b, k):
            if node.op != op:
                return None
            x, y = node.args
            return in_order(x, y, b, k)

        return match

    def match_either(node, b, k):
        if node.op != op:
            return None
        x, y = node.args
        result = in_order(x, y, b, k)
        return result if result is not None else in_order(y, x, b, k)

    return match_either


def _sequence(ms: list[Matcher]):
    """Match ms[i] against args[i] for every i, left to right, with backtracking."""

    def run(args, b, k, i=0):
        if i == len(ms):
            return k(b)
        return ms[i](args[i], b, lambda b: run(args, b, k, i + 1))

    return run


def all_matches(matcher: Matcher, node: Node, bindings: Bindings | None = None) -> list[Bindings]:
    """Every way the compiled matcher matches node, in the order it finds them."""
    found: list[Bindings] = []

    def collect(b):
        found.append(dict(b))
        return None

    matcher(node, dict(bindings or {}), collect)
    return found


# -- reference matcher -------------------------------------------------------------------------
def match_ref(p, node: Node, b: Bindings) -> Iterator[Bindings]:
    """Every way pattern p matches node, given bindings b: the plain generator twin."""
    if isinstance(p, PVar):
        ok = kind_predicate(p.kind)
        if ok is not None and not ok(node):
            return
        if p.name == "_":
            yield b
        elif p.name in b:
            if b[p.name] is node:
                yield b
        else:
            yield {**b, p.name: node}
    elif isinstance(p, PLit):
        if literal_matches(p.value, node):
            yield b
    elif isinstance(p, PNamed):
        if p.name in b:
            if b[p.name] is node:
                yield b
            return
        for b2 in match_ref(p.pattern, node, b):
            yield {**b2, p.name: node}
    elif p.optional:
        if node.op == p.op and len(node.args) == 1:
            yield from match_ref(p.args[0], node.args[0], b)
        yield from match_ref(p.args[0], node, b)
    elif node.op == p.op and len(node.args) == len(p.args):
        orders = [node.args]
        if is_commutative(p.op):
            orders.append(node.args[::-1])
        for args in orders:
            yield from _match_args(p.args, args, b)


def _match_args(patterns, args, b: Bindings) -> Iterator[Bindings]:
    if not patterns:
        yield b
        return
    for b2 in match_ref(patterns[0], args[0], b):
        yield from _match_args(patterns[1:], args[1:], b2)
