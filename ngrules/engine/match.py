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

from ngrules.engine.matchgen import compile_generated
from ngrules.engine.semantics import (
    Bindings,
    Matcher,
    is_commutative,
    kind_predicate,
    literal_matches,
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


def trace_matches(p, node: Node, b: Bindings, score: int = 0, fail: Fail | None = None):
    """The reference matcher, yielding (bindings, score so far), and telling `fail` where
    each attempt stopped (how `explain` finds the closest miss). A node matched by an op or a
    literal adds `NODE_SCORE`, any other element 1."""
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
        for b2, s in trace_matches(p.pattern, node, b, score, fail):
            yield {**b2, p.name: node}, s
    else:
        yield from _trace_op(p, node, b, score, fail)


def _tell(fail: Fail | None, score: int, p, why: str, node: Node, b: Bindings) -> None:
    if fail is not None:
        fail(score, p, why, node, b)


def _trace_op(p: POp, node: Node, b: Bindings, score: int, fail: Fail | None):
    if p.optional:
        if node.op == p.op and len(node.args) == 1:
            yield from trace_matches(p.args[0], node.args[0], b, score + NODE_SCORE, fail)
        yield from trace_matches(p.args[0], node, b, score, fail)
        return
    if node.op != p.op or len(node.args) != len(p.args):
        _tell(fail, score, p, "op", node, b)
        return
    orders = [node.args, node.args[::-1]] if is_commutative(p.op) else [node.args]
    for args in orders:
        yield from _trace_args(p.args, args, b, score + NODE_SCORE, fail)


def _trace_args(patterns, args, b: Bindings, score: int, fail: Fail | None):
    if not patterns:
        yield b, score
        return
    for b2, s in trace_matches(patterns[0], args[0], b, score, fail):
        yield from _trace_args(patterns[1:], args[1:], b2, s, fail)
