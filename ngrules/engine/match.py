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
- a commutative op tries its arguments in order, then swapped (unless the checker marked it
  `one_order`: lang/symmetry.py); one match at one node tries at most `MAX_ORDERS` orders,
  then raises an error located at the pattern.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ngrules.engine.matchgen import compile_generated
from ngrules.engine.semantics import (
    MAX_ORDERS,
    Bindings,
    Matcher,
    kind_predicate,
    literal_matches,
    swaps,
    too_many_orders,
)
from ngrules.ir.graph import Node
from ngrules.lang.syntax import PLit, PNamed, POp, PVar


# -- compiled matchers ---------------------------------------------------------------------------
def compile_pattern(p, prebound: frozenset[str] = frozenset()) -> Matcher:
    """A CPS matcher for one pattern, generated as straight-line Python (see matchgen).

    `prebound` names must be in the bindings passed to the matcher (earlier roots bound them).
    """
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
    for found, _ in trace_matches(p, node, b):
        yield found


#: fail(elements matched so far, pattern element, why, node found, bindings): why is "op",
#: "kind", "literal" or "rebound" (a name already bound to another node).
Fail = Callable[[int, Any, str, Node, Bindings], None]


#: What a matched node counts for in a trace's score, against 1 for a variable: candidates
#: rank by the nodes they matched first (a variable matches anything), then by the rest.
NODE_SCORE = 1000


def trace_matches(p, node: Node, b: Bindings, score: int = 0, fail: Fail | None = None,
                  tries: list | None = None):
    """The reference matcher, yielding (bindings, score so far), and telling `fail` where
    each attempt stopped (how `explain` finds the closest miss). A node matched by an op or a
    literal adds `NODE_SCORE`, any other element 1. `tries` counts the orders of commutative
    ops tried, with the span to blame (made at the outermost call)."""
    if tries is None:
        tries = [0, p.span, node]
    if isinstance(p, PVar):
        ok = kind_predicate(p.kind)
        if ok is not None and not ok(node):
            _tell(fail, score, p, "kind", node, b)
        elif p.name == "_":
            yield b, score + 1
        elif p.name in b and b[p.name] is not node:
            _tell(fail, score, p, "rebound", node, b)
        else:
            yield {**b, p.name: node}, score + 1
    elif isinstance(p, PLit):
        if literal_matches(p.value, node):
            yield b, score + NODE_SCORE
        else:
            _tell(fail, score, p, "literal", node, b)
    elif isinstance(p, PNamed):
        if p.name in b:
            if b[p.name] is node:
                yield b, score + 1
            else:
                _tell(fail, score, p, "rebound", node, b)
            return
        for b2, s in trace_matches(p.pattern, node, b, score, fail, tries):
            yield {**b2, p.name: node}, s
    else:
        yield from _trace_op(p, node, b, score, fail, tries)


def _tell(fail: Fail | None, score: int, p, why: str, node: Node, b: Bindings) -> None:
    if fail is not None:
        fail(score, p, why, node, b)


def _trace_op(p: POp, node: Node, b: Bindings, score: int, fail: Fail | None, tries: list):
    if p.optional:
        if node.op == p.op and len(node.args) == 1:
            yield from trace_matches(p.args[0], node.args[0], b, score + NODE_SCORE, fail, tries)
        yield from trace_matches(p.args[0], node, b, score, fail, tries)
        return
    if node.op != p.op or len(node.args) != len(p.args):
        _tell(fail, score, p, "op", node, b)
        return
    if not swaps(p):
        yield from _trace_args(p.args, node.args, b, score + NODE_SCORE, fail, tries)
        return
    for args in (node.args, node.args[::-1]):
        tries[0] += 1
        if tries[0] > MAX_ORDERS:
            too_many_orders(tries[1], tries[2])
        if fail is not None or _may_match(p.args[1], args[1]):  # decided before backtracking
            yield from _trace_args(p.args, args, b, score + NODE_SCORE, fail, tries)


def _may_match(p, node: Node) -> bool:
    return not isinstance(p, POp) or p.optional or node.op == p.op


def _trace_args(patterns, args, b: Bindings, score: int, fail: Fail | None, tries: list):
    if not patterns:
        yield b, score
        return
    for b2, s in trace_matches(patterns[0], args[0], b, score, fail, tries):
        yield from _trace_args(patterns[1:], args[1:], b2, s, fail, tries)
