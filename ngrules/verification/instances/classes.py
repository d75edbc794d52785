"""Axes classes: which positions of a pattern must have the same axes."""

from __future__ import annotations

from dataclasses import dataclass, field

from ngrules.ir.ops import OPS
from ngrules.lang.syntax import PNamed, POp, PVar, children
from ngrules.verification.instances.hints import Hints


# -- axes constraints: which positions of a pattern have the same axes ---------------------------
def _key(p) -> object:
    """What identifies a pattern position: its name when it has one, else the object itself."""
    named = isinstance(p, (PVar, PNamed)) and p.name != "_"
    return p.name if named else id(p)


def _positions(roots):
    """Every position of the patterns, the inside of a named sub-pattern once."""
    seen, stack = set(), list(roots)
    while stack:
        p = stack.pop()
        if isinstance(p, PNamed):
            if p.name in seen:
                continue
            seen.add(p.name)
        yield p
        stack.extend(children(p))


def _equal_axes(p) -> tuple:
    """The positions the op table gives p's own axes: a named pattern's inside, the operands
    of an elementwise op (optional or not: either way the position has the operand's axes)."""
    if isinstance(p, PNamed):
        return (p.pattern,)
    return p.args if isinstance(p, POp) and OPS[p.op].has("elementwise") else ()


def _intersect(a: tuple[int, int], b: tuple[int, int] | None) -> tuple[int, int]:
    return a if b is None else (max(a[0], b[0]), min(a[1], b[1]))


@dataclass
class Constraints:
    """Classes of pattern positions that have the same axes in every instance (unified over
    named patterns, elementwise ops and `u.axes == v.axes` guards), and per class what the
    guards say: a rank range, expressions the axes equal."""

    classes: dict = field(default_factory=dict)  # position key -> class
    ranks: dict = field(default_factory=dict)  # class -> (lowest, highest) rank
    equations: dict = field(default_factory=dict)  # class -> expressions its axes equal

    def of(self, p) -> object | None:
        """p's class; None for an untracked unnamed position (`_`, or outside the rule)."""
        key = _key(p)
        return self.classes.get(key, key if isinstance(key, str) else None)

    def names(self) -> dict[str, object]:
        return {k: c for k, c in self.classes.items() if isinstance(k, str)}


def constraints(roots, hints: Hints) -> Constraints:
    """Union-find over the patterns' positions, then the guards' facts gathered per class."""
    parent: dict = {}

    def find(k):
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k

    pairs = [(_key(p), _key(q)) for p in _positions(roots) for q in (p, *_equal_axes(p))]
    for a, b in [*pairs, *hints.same]:
        parent[find(a)] = find(b)
    cons = Constraints({k: find(k) for k in parent})
    scalars = [p for p in _positions(roots) if isinstance(p, PVar) and p.kind == "scalar"]
    ranked = [(PVar(name), rng) for name, rng in hints.ranks.items()]
    for p, rng in [*ranked, *((p, (0, 0)) for p in scalars)]:
        c = cons.of(p)
        cons.ranks[c] = _intersect(rng, cons.ranks.get(c))
    for name, exprs in hints.equations.items():
        cons.equations.setdefault(cons.of(PVar(name)), []).extend(exprs)
    return cons


def fixed_by_guards(roots, hints: Hints) -> dict[int, dict]:
    """Per op pattern (by id), the attributes guards fix on its name (`c.position == 0` with
    `c @ Concat(...)`): its plan builds them in rather than discarding other draws."""
    return {
        id(p.pattern): dict(hints.attrs[p.name])
        for p in _positions(roots)
        if isinstance(p, PNamed) and p.name in hints.attrs and isinstance(p.pattern, POp)
    }
