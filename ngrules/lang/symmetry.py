"""Commutative ops whose swapped argument order cannot change what a rule does.

`Multiply(Multiply(a, b), Multiply(c, d))` matches a product of products in 2**3 orders; with
a false guard every one is tried, so a balanced product tree of depth 5 is 2**31 matches
(issue 37, F10). When the two operands of a commutative op are the same pattern up to names,
and those names occur nowhere else (not in the other operand, another root, a guard, a let or
an assumption), the swapped order matches exactly when the written one does, with the names
exchanged: every clause sees the same values, so it is false in both or true in the first,
which wins. Such an op is marked `one_order` and both matchers try its written order only.

The replacement may read the names (`=> Multiply(b, a)`); the first order still wins, as
before. What is lost is only a second chance for a replacement that fails to build in the
first order and not in the other (an ill-formed rule either way).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from ngrules.ir.ops import OPS
from ngrules.lang.syntax import EVar, Expr, Pattern, PLit, PNamed, POp, PVar, walk


def _commutative(p: POp) -> bool:
    opdef = OPS.get(p.op)
    return (not p.optional and len(p.args) == 2 and opdef is not None
            and opdef.has("commutative") and opdef.arity == 2)


def _names(p: Pattern) -> Counter:
    return Counter(n.name for n in walk([p]) if isinstance(n, (PVar, PNamed)) and n.name != "_")


def _shape(p: Pattern) -> tuple:
    """The pattern with its names replaced by their order of first appearance."""
    order: dict[str, int] = {}
    out = []
    for n in walk([p]):
        if isinstance(n, PVar):
            out.append(("v", n.kind, -1 if n.name == "_" else order.setdefault(n.name, len(order))))
        elif isinstance(n, PNamed):
            out.append(("n", order.setdefault(n.name, len(order))))
        elif isinstance(n, PLit):
            out.append(("l", n.value))
        elif isinstance(n, POp):
            out.append(("o", n.op, n.optional, len(n.args)))
    return tuple(out)


def _alike(a: Pattern, b: Pattern) -> bool:
    """Whether a and b may have one `_shape`, from their roots alone (most operands of a
    commutative op differ there: their shapes are not computed)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, POp):
        return (a.op, a.optional, len(a.args)) == (b.op, b.optional, len(b.args))
    if isinstance(a, PVar):
        return a.kind == b.kind
    return not isinstance(a, PLit) or a.value == b.value


def one_order(roots: Sequence[Pattern], read: Iterable[str]) -> tuple[Pattern, ...]:
    """The roots with each commutative op whose swap cannot matter marked `one_order`;
    `read` names what the clauses read."""
    total = sum((_names(r) for r in roots), Counter())
    observed = set(read)

    def private(arg: Pattern) -> bool:
        names = _names(arg)
        return all(total[n] == c and n not in observed for n, c in names.items())

    def mark(p: Pattern) -> Pattern:
        if isinstance(p, PNamed):
            inner = mark(p.pattern)
            return p if inner is p.pattern else PNamed(p.name, inner, p.span)
        if not isinstance(p, POp):
            return p
        args = tuple(mark(a) for a in p.args)
        single = (_commutative(p) and _alike(*args) and _shape(args[0]) == _shape(args[1])
                  and private(args[0]) and private(args[1]))
        if not single and all(a is b for a, b in zip(args, p.args)):
            return p
        return POp(p.op, args, p.optional, p.span, one_order=single)

    return tuple(mark(r) for r in roots)


def names_read(exprs: Iterable[Expr]) -> set[str]:
    """Every name the expressions (or clauses) read."""
    return {e.name for e in walk(list(exprs)) if isinstance(e, EVar)}
