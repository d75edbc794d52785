"""Named sub-patterns written out, and patterns compared up to variable names.

`where h = p` and `h @ p` name a sub-pattern; a checked rule carries it as `PNamed(h, p)` at
every use of `h`, so the matcher can meet the uses in any order and still bind one node.
"""

from __future__ import annotations

from collections.abc import Callable

from ngrules.lang.syntax import (
    MAX_TREE_DEPTH,
    Pattern,
    PLit,
    PNamed,
    POp,
    PVar,
    Where,
    children,
    walk,
)

#: Limits on a pattern once its named sub-patterns are written out at every use.
MAX_SIZE = 1000
MAX_DEPTH = MAX_TREE_DEPTH  # a chain `a + b + ... + z` is one node deeper per term

Report = Callable[[str, object], None]


def _definitions(roots, wheres: list[Where], report: Report) -> dict[str, tuple[Pattern, object]]:
    """name -> (pattern, span) for every `where` and every `name @ pattern`."""
    defs: dict[str, tuple[Pattern, object]] = {}

    def define(name, pattern, span):
        if name in defs:
            report(f"sub-pattern {name!r} is defined twice (first at {defs[name][1]})", span)
        else:
            defs[name] = (pattern, span)

    for w in wheres:
        define(w.name, w.pattern, w.span)
    for p in walk([*roots, *(w.pattern for w in wheres)]):
        if isinstance(p, PNamed):
            define(p.name, p.pattern, p.span)
    return defs


def _references(pattern: Pattern, defs) -> set[str]:
    return {p.name for p in walk([pattern]) if isinstance(p, (PVar, PNamed)) and p.name in defs}


def _topological(defs, report: Report) -> list[str] | None:
    """Definitions, each after those it uses; None (reported) if one contains itself."""
    uses = {name: _references(p, defs) for name, (p, _) in defs.items()}
    order, done = [], set()
    while len(order) < len(defs):
        ready = [n for n in defs if n not in done and uses[n] <= done]
        if not ready:
            name = next(n for n in defs if n not in done)
            report(f"sub-pattern {name!r} contains itself", defs[name][1])
            return None
        order.extend(ready)
        done.update(ready)
    return order


def _measure(p: Pattern, known: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """(nodes, depth) of p with every named sub-pattern written out."""
    if isinstance(p, (PVar, PNamed)) and p.name in known:
        return known[p.name]
    sizes = [_measure(c, known) for c in children(p)]
    return 1 + sum(s for s, _ in sizes), 1 + max((d for _, d in sizes), default=0)


def _substitute(p: Pattern, expanded: dict[str, PNamed]) -> Pattern:
    if isinstance(p, (PVar, PNamed)) and p.name in expanded:
        return expanded[p.name]
    if isinstance(p, POp):
        args = tuple(_substitute(a, expanded) for a in p.args)
        return p if args == p.args else POp(p.op, args, p.optional, p.span)
    return p


def expand_named(roots, wheres: list[Where], report: Report) -> tuple[Pattern, ...] | None:
    """The roots with every named sub-pattern written out as PNamed at each use (None on error)."""
    defs = _definitions(roots, wheres, report)
    failed = False
    for p in walk([*roots, *(w.pattern for w in wheres)]):
        if isinstance(p, PVar) and p.name in defs and p.kind is not None:
            report(f"{p.name!r} names a sub-pattern, so it cannot also be typed", p.span)
            failed = True
    order = _topological(defs, report)
    if order is None or failed:
        return None
    known: dict[str, tuple[int, int]] = {}
    expanded: dict[str, PNamed] = {}
    for name in order:
        pattern, span = defs[name]
        size, depth = _measure(pattern, known)
        known[name] = (size + 1, depth + 1)
        expanded[name] = PNamed(name, _substitute(pattern, expanded), span)
    if not _within_limits(roots, known, report):
        return None
    used = {
        p.name for p in walk([_substitute(r, expanded) for r in roots]) if isinstance(p, PNamed)
    }
    for w in wheres:
        if w.name not in used:
            report(f"sub-pattern {w.name!r} is defined but never used in the pattern", w.span)
            return None
    return tuple(_substitute(r, expanded) for r in roots)


def _within_limits(roots, known, report: Report) -> bool:
    for r in roots:
        size, depth = _measure(r, known)
        if size > MAX_SIZE or depth > MAX_DEPTH:
            report(
                f"the pattern is too large once named sub-patterns are written out ({size} "
                f"nodes, {depth} levels; the limits are {MAX_SIZE} and {MAX_DEPTH})",
                r.span,
            )
            return False
    return True


def pattern_key(roots: tuple[Pattern, ...]) -> tuple:
    """A value equal for two root tuples that differ only in variable names and spans."""
    names: dict[str, int] = {}

    def key(p: Pattern) -> tuple:
        if isinstance(p, PLit):
            return ("lit", p.value)
        if isinstance(p, PVar):
            index = -1 if p.name == "_" else names.setdefault(p.name, len(names))
            return ("var", index, p.kind)
        if isinstance(p, PNamed):
            index = names.setdefault(p.name, len(names))
            return ("named", index, key(p.pattern))
        return ("op", p.op, p.optional, tuple(key(a) for a in p.args))

    return tuple(key(r) for r in roots)
