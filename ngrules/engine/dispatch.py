"""The rules of a pass at one op, tried by one generated function.

A walk tries the rules whose root can match a node's op, in order, at every node it visits:
the attempt must cost little more than the matchers themselves. `first_match(rules)` is a
function generated for that list of rules (cached: the same compiled rules give the same
function) that counts each attempt, calls each rule's matcher directly (a `=> x` rule's
returning matcher without a bindings dict or continuation; any other rule through `apply`),
and records the first match: what `_Pass._first_match` did in a loop, without the per-attempt
calls through the rule object. Its semantics are the loop's; `tests/test_dispatch.py` compares
them on random graphs and rule sets.

Nothing from rule text enters the source: rules and matchers are entries of the function's
constant table, the code names them by index.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ngrules.engine.compiled import CompiledRule
from ngrules.engine.matchgen import WRONG_TYPE

_FOUND = (
    "        s.matches += 1",
    "        run.record(name, R{i}, *found, V)",
    "        return R{i}, found",
)

_RETURNING = (
    "    value = M{i}(node, None, None, V)",
    "    if value is not None:",
    "        if value is _WRONG or run.checked:  # apply raises the error / record validates",
    "            found = R{i}.apply(node, None, V)",
    *["    " + line for line in _FOUND],
    "        s.matches += 1  # what run.record does for a match building nothing",
    "        if value in V:",
    "            value = V.force(value)",
    "        run.trace.append((N{i}, L{i}, node, value, name, V if node in V else None))",
    "        budget = run.budget",
    "        budget.left -= 1",
    "        if budget.left <= 0:",
    "            budget.exhausted = True",
    "        return R{i}, ((node,), (value,), ())",
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

_CACHE: dict[tuple[CompiledRule, ...], Callable] = {}


def first_match(rules: Sequence[CompiledRule]) -> Callable:
    """`first(node, V, run, name)`: (rule, (roots, replacements, new nodes)) for the first of
    `rules` (one-root rules) that matches at node, counted and recorded in `run` under the
    pass `name` with the pending nodes `V`; (None, None) if none matches or the fuel is out."""
    key = tuple(rules)
    found = _CACHE.get(key)
    if found is None:
        found = _CACHE[key] = _generate(key)
    return found


def _generate(rules: tuple[CompiledRule, ...]) -> Callable:
    lines = ["def first(node, V, run, name):", "    if run.budget.exhausted:"]
    lines.append("        return None, None")
    consts: dict[str, object] = {"_WRONG": WRONG_TYPE}
    for i, rule in enumerate(rules):
        consts[f"R{i}"], consts[f"N{i}"], consts[f"L{i}"] = rule, rule.name, rule.location
        lines += [f"    s = R{i}.stats", "    s.attempts += 1"]
        if rule.returning is not None:
            consts[f"M{i}"] = rule.returning
            lines += [line.format(i=i) for line in _RETURNING]
        elif rule.fused is not None:
            consts[f"F{i}"] = rule.fused
            lines += [line.format(i=i) for line in _FUSED]
        else:
            lines += [line.format(i=i) for line in _APPLYING]
    lines.append("    return None, None")
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<ngrules dispatch>", "exec"), consts)  # noqa: S102 - generated
    first = consts["first"]
    first.source = source
    return first
