"""Pattern matching semantics, the compiled matcher's entry point, and the reference matcher.

A compiled matcher `m(node, b, k)` tries to match `node` given bindings `b` and calls `k` with
the extended bindings for each way it matches, in order, returning the first non-None result
of `k`. A false guard or a failed later root returns None to it, and matching resumes with the
next alternative (full backtracking). `match_ref` is the plain generator twin that the
property tests hold the compiled matcher to. Nothing recurses on graph depth.

Semantics (identical in both matchers):
- a variable binds any node of its kind; a second use must be the same node; `_` binds nothing;
- `name @ p` binds the node p matched; every use of the name is one node;
- a literal matches a node known to hold that value everywhere (through views);
- `Op?(p)` tries p under an `Op` first, then p on the node itself;
- a commutative op tries its arguments in order, then swapped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .graph import UNKNOWN, Node
from .ops import OPS
from .syntax import PLit, PNamed, PVar
from .values import known_scalar

Bindings = dict[str, Any]
Cont = Callable[[Bindings], Any]
Matcher = Callable[[Node, Bindings, Cont], Any]

_F32 = np.dtype(np.float32)


def literal_matches(value: float, node: Node) -> bool:
    """Does node hold `value` everywhere, compared in the node's dtype?"""
    return literal_is(node, rounded(value, _F32), float(value))


def literal_is(node: Node, as_f32: float, as_f64: float) -> bool:
    """The literal test with the value pre-rounded to each dtype (0.1 in float32 is not 0.1)."""
    known = node._scalar
    if known is UNKNOWN:
        known = known_scalar(node)
    if known is None:
        return False
    return known == (as_f32 if node.dtype is _F32 else as_f64)


def rounded(value: float, dtype) -> float:
    return float(np.asarray(value, dtype=dtype))


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
def compile_pattern(p, prebound: frozenset[str] = frozenset()) -> Matcher:
    """A CPS matcher for one pattern, generated as straight-line Python (see matchgen).

    `prebound` names must be in the bindings passed to the matcher (earlier roots bound them).
    """
    from .matchgen import compile_generated

    return compile_generated(p, prebound)


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
