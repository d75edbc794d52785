"""The rules of a pass at one op, tried by one generated function.

A walk tries the rules whose root can match a node's op, in order, at every node it visits:
the attempt must cost little more than the matchers themselves. `first_match(rules)` is a
function generated for that list of rules (cached: the same compiled rules give the same
function) that counts each attempt, calls each rule's matcher directly (a `=> x` rule's
returning matcher without a bindings dict or continuation; any other rule through `apply`),
and records the first match: what `first_in_order` does in a loop, without the per-attempt
calls through the rule object. Its semantics are the loop's; `tests/test_dispatch.py` compares
them on random graphs and rule sets.

Nothing from rule text enters the source: rules and matchers are entries of the function's
constant table, the code names them by index.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ngrules.engine.compiled import CompiledRule
from ngrules.engine.matchgen import WRONG_TYPE, Inline, inline_matcher
from ngrules.engine.results import set_origin
from ngrules.lang import code_cache
from ngrules.lang.syntax import PNamed, POp

#: A match found by `apply` (roots, replacements, new nodes in `{found}`), counted and recorded.
_RECORD_FOUND = (
    "s.matches += 1",
    "run.record(name, R{i}, *{found}, V)",
    "return R{i}, {found}",
)

#: One match's fuel, spent as `run.record` spends it.
_SPEND = ("budget = run.budget", "budget.left -= 1", "if budget.left <= 0:",
          "    budget.spent_chunk()")

#: A pending x of a `=> x` match, built (at a built node: its normal form replaces it).
_FORCE_VALUE = ("if {value} in V:", "    {value} = V.force({value})")

#: What `run.record` does for a `=> x` match, which builds nothing: x is in `{value}`; the
#: trace entry's last field is `{pending}`, the dispatch returns `R{i}, {result}`.
_RECORD_RETURNED = (
    "s.matches += 1",
    "run.trace.append((N{i}, L{i}, node, {value}, name, {pending}))",
    *_SPEND,
    "return R{i}, {result}",
)

#: What `run.record` does for a match of pasted clauses, (roots, replacements, new nodes) in
#: `{found}`, unless the run is checked (then `record` validates the replacements).
_RECORD_PASTED = (
    "s.matches += 1",
    "if run.checked:",
    "    run.record(name, R{i}, *{found}, V)",
    "    return R{i}, {found}",
    "for n in {found}[2]:  # the new nodes' provenance",
    "    if n.origin is None:",
    "        _set_origin(n, \"origin\", RULE{i})",
    "run.trace.append((N{i}, L{i}, *{found}, name, "
    "V if V and not V.keys().isdisjoint({found}[0]) else None))",
    *_SPEND,
    "return R{i}, {found}",
)
#: The trace's pending field for a match at a built node (pending if it is in V).
_PENDING_AT_NODE = "V if node in V else None"


def _lines(template, indent: int, **fields: str) -> list[str]:
    """The template's lines at `indent` spaces, its fields but `{i}` filled in."""
    return [" " * indent + line.format(i="{i}", **fields) for line in template]


_FOUND = tuple(_lines(_RECORD_FOUND, 8, found="found"))

_RETURNING = (
    "    value = M{i}(node, None, None, V)",
    "    if value is not None:",
    "        if value is _WRONG or run.checked:  # apply raises the error / record validates",
    "            found = R{i}.apply(node, None, V)",
    *["    " + line for line in _FOUND],
    *_lines(_FORCE_VALUE, 8, value="value"),
    *_lines(_RECORD_RETURNED, 8, value="value", pending=_PENDING_AT_NODE,
            result="((node,), (value,), ())"),
)

_APPLYING = (
    "    found = R{i}.apply(node, None, V)",
    "    if found is not None:",
    *_FOUND,
)

_FUSED = (  # guards, lets and the replacement evaluated by the matcher itself (see `fused`)
    "    found = F{i}(node, None, None, V)",
    "    if found is not None:",
    *_FOUND,
)

_CACHE: dict[tuple, Callable] = {}


def first_match(rules: Sequence[CompiledRule]) -> Callable:
    """`first(node, V, run, name)`: (rule, (roots, replacements, new nodes)) for the first of
    `rules` (one-root rules) that matches at node, counted and recorded in `run` under the
    pass `name` with the pending nodes `V`; (None, None) if none matches or the fuel is out."""
    return _cached(tuple(rules), False)


def first_on_view(rules: Sequence[CompiledRule]) -> Callable | None:
    """For rules that are all `=> x` with a root op (see `driver._Pass.returning`):
    `first_on(node, view, V, run, name)`, `first` at a node that is not built yet, its
    arguments' images in `view` (not in V: that costs an insert per node). A rule that
    replaces it records the view in its trace entry (read back, the root is rebuilt on it);
    only a checked run, or a wrong rule, enters it in V to call `apply`. It returns (rule,
    the replacement) or (None, None). None if some rule's matcher cannot be pasted in."""
    return _cached(tuple(rules), True)


def _cached(rules: tuple[CompiledRule, ...], on_view: bool):
    key = (rules, on_view)
    if key not in _CACHE:
        _CACHE[key] = _generate(rules, on_view)
    return _CACHE[key]


def _generate(rules: tuple[CompiledRule, ...], on_view: bool) -> Callable | None:
    params = "node, view, V, run, name" if on_view else "node, V, run, name"
    lines = [f"def first({params}):", "    if run.budget.exhausted:", "        return None, None"]
    consts: dict[str, object] = {"_WRONG": WRONG_TYPE}
    for i, rule in enumerate(rules):
        consts[f"R{i}"], consts[f"N{i}"], consts[f"L{i}"] = rule, rule.name, rule.location
        lines += [f"    s = R{i}.stats", "    s.attempts += 1"]
        inlined = _inlined(rule, i, on_view)
        if inlined is not None:
            lines += inlined[0]
            consts.update(inlined[1])
        elif on_view:
            return None
        elif rule.returning is not None:
            consts[f"M{i}"] = rule.returning
            lines += [line.format(i=i) for line in _RETURNING]
        elif rule.fused is not None:
            consts[f"F{i}"] = rule.fused
            lines += [line.format(i=i) for line in _FUSED]
        else:
            lines += [line.format(i=i) for line in _APPLYING]
    lines.append("    return None, None")
    source = "\n".join(lines) + "\n"
    exec(code_cache.compiled(source, "<ngrules dispatch>"), consts)  # noqa: S102 - generated
    first = consts["first"]
    first.source = source
    return first


def _inlined(rule: CompiledRule, i: int, on_view: bool) -> tuple[list[str], dict] | None:
    """Rule i's matcher pasted into the dispatch (see `matchgen.Inline`), or None."""
    root = rule.rule.roots[0]
    if rule.returning is not None:
        returns = rule.rule.replacement[0].name
    elif not rule.is_multi_root and not on_view:  # fused, if its clauses generate (else
        returns = None  # `_NoClauses`: its `fused` is None too)
    else:
        return None
    enter = ["V[node] = view"] if on_view else []  # a rule fires: the node becomes pending

    slow = _SLOW_ON_VIEW if on_view else _SLOW_FOUND

    def on_value(value: str) -> list[str]:
        # on a view, the trace keeps the root's view (the node is not pending: nothing else
        # reads it), and the dispatch returns the replacement alone, a pending x as it is (it
        # stands for itself: `driver._returned`)
        fields = {"pending": "(V, view)", "result": value} if on_view else {
            "pending": _PENDING_AT_NODE, "result": f"((node,), ({value},), ())"}
        forced = [] if on_view else _lines(_FORCE_VALUE, 0, value=value)
        returned = [x.format(i=i) for x in (*forced, *_lines(_RECORD_RETURNED, 0, value=value,
                                                              **fields))]
        return ["if run.checked:  # record validates", *["    " + x for x in enter],
                *["    " + x.format(i=i) for x in slow], *returned]

    def on_found(found: str) -> list[str]:
        return [x.format(i=i) for x in _lines(_RECORD_PASTED, 0, found=found)]

    def on_wrong() -> list[str]:  # apply raises the located error
        return [*enter, *[x.format(i=i) for x in slow]]

    plain_root = root
    while isinstance(plain_root, PNamed):
        plain_root = plain_root.pattern
    if on_view and not (isinstance(plain_root, POp) and not plain_root.optional):
        return None  # the root's view is read once, at the root's own op
    clause_consts: dict[str, object] = {}

    def clauses(bound: dict[str, str]) -> list[str]:
        pasted = rule.clause_lines(bound, f"m{i}_x_")
        if pasted is None:
            raise _NoClauses
        clause_consts.update(pasted[1])
        return pasted[0]

    inline = Inline(f"m{i}_", "view" if on_view else None, on_value, on_found, on_wrong, clauses)
    try:
        pasted = inline_matcher(root, inline, returns)
    except _NoClauses:  # (the same test as `rule.fusable`: its `fused` is None)
        return None
    if pasted is None:
        return None
    lines, consts = pasted
    consts.update(clause_consts, _set_origin=set_origin)
    consts[f"RULE{i}"] = rule.rule
    return lines, consts


class AtOp(list):
    """The rules whose first root can match a node with some op (`rules_at_op`), and `first`
    and `first_on`, the functions that try them (above), generated when first read: a pass
    asks which rules are at each op its rules name, most of which a graph may not have."""

    __slots__ = ("first", "first_on")

    def __getattr__(self, name: str):  # only while the slot is unset
        if name == "first":
            self.first = first_match(self)
        elif name == "first_on":
            returning = self and all(r.returns_a_binding and r.root_ops is not None for r in self)
            self.first_on = first_on_view(self) if returning else None
        else:
            raise AttributeError(name)
        return getattr(self, name)


def rules_at_op(rules: Sequence[CompiledRule], op: str) -> AtOp:
    """The rules whose first root can match a node with this op, in order."""
    return AtOp(r for r in rules if r.root_ops is None or op in r.root_ops)


class _NoClauses(Exception):
    """A rule's clauses that cannot be generated (an unknown function): not pasted."""


#: A match that `apply` re-finds (a checked run validates; a wrong `=> x` raises, located).
_SLOW_FOUND = ("found = R{i}.apply(node, None, V)", *_lines(_RECORD_FOUND, 0, found="found"))

_SLOW_ON_VIEW = (*_SLOW_FOUND[:-1], "return R{i}, found[1][0]")


def first_in_order(rules: Sequence[CompiledRule], node, ctx, pending, run, name: str):
    """What the generated `first` does, as a loop: for a multi-root round (`ctx`, the users
    index) and for a run that times every attempt (`rewrite(..., stats=True)`), and the
    reference the generated functions are tested against."""
    timed = run.timed
    for rule in rules:
        stats = rule.stats
        stats.attempts += 1
        if timed:
            start = time.perf_counter()
            found = rule.apply(node, ctx, pending)
            stats.seconds += time.perf_counter() - start
        else:
            found = rule.apply(node, ctx, pending)
        if found is not None:
            stats.matches += 1
            run.record(name, rule, *found, pending)
            return rule, found
    return None, None
