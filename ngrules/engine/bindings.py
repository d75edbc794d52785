"""What a match bound, and why a guard was false, in a few words each.

Traces and explanations show each variable with the node it matched in short form
(`x = Placeholder(x)`, `s = Sum(Negative(...))`), and a false guard with the values of its
operands, so a user sees what the rule saw. Everything here is recomputed from the rule and the
matched nodes (nodes are immutable), so rewriting records nothing extra.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ngrules.errors import NgrulesError
from ngrules.ir.graph import Node
from ngrules.lang.bounds import shown
from ngrules.lang.expr import NotBoolean, evaluate, guard_truth
from ngrules.lang.rules import Rule
from ngrules.lang.syntax import EBinary, EBool, ECall, ENum, EStr, EUnary, Expr, Guard, Let

_MAX = 60
_COMPARISONS = {"==", "!=", "<", "<=", ">", ">=", "in"}


def describe(node: Node, depth: int = 1) -> str:
    """`Op(Arg(...), ...)` to the given depth; leaves by name (`Placeholder(x)`)."""
    label = node.name or ""
    if not node.args:
        return f"{node.op}({label})" if label else node.op
    if depth == 0:
        return f"{node.op}(...)"
    return f"{node.op}({', '.join(describe(a, depth - 1) for a in node.args)})"


def short(value: Any) -> str:
    """A node in short form, any other value by its repr, cut to a line's worth."""
    text = describe(value) if isinstance(value, Node) else shown(value, _MAX)
    return text if len(text) <= _MAX else text[: _MAX - 3] + "..."


def format_bindings(env: Mapping[str, Any]) -> str:
    """`x = Placeholder(x), s = Sum(...)`: each name bound by a match and its value."""
    return ", ".join(f"{k} = {short(v)}" for k, v in env.items() if k != "_")


def match_bindings(rule: Rule, roots: Sequence[Node]) -> dict[str, Any] | None:
    """The bindings (pattern variables, then lets) with which `rule` matches at `roots`, or
    None if it does not (the first way the engine would find, guards honoured)."""
    from ngrules.engine.match import trace_matches

    def tries(i: int, b: dict):
        if i == len(roots):
            yield b
            return
        for b2, _ in trace_matches(rule.roots[i], roots[i], b):
            yield from tries(i + 1, b2)

    for b in tries(0, {}):
        env = _clauses_hold(rule, dict(b))
        if env is not None:
            return env
    return None


def _clauses_hold(rule: Rule, env: dict) -> dict | None:
    try:
        for clause in rule.clauses:
            if isinstance(clause, Let):
                env[clause.name] = evaluate(clause.expr, env)
            elif not guard_truth(evaluate(clause.expr, env)):
                return None
    except (NgrulesError, NotBoolean):
        return None
    return env


def false_guard_detail(guard: Guard | Expr, env: Mapping[str, Any]) -> str:
    """Why a false guard is false: its false conjunct (if it has several) and the values of
    that part's operands, e.g. `, with len(s.reduction_axes) = 1`."""
    top = expr = guard.expr if isinstance(guard, Guard) else guard
    while isinstance(expr, EBinary) and expr.op == "and":
        expr = expr.left if not _true(_value(expr.left, env)) else expr.right
    shown = [f"{_quote(o)} = {short(_value(o, env))}" for o in _operands(expr) if not _literal(o)]
    part = "" if expr is top else f": `{_quote(expr)}` is false"
    return part + (f", with {'; '.join(shown)}" if shown else "")


def _operands(expr: Expr) -> list[Expr]:
    if isinstance(expr, EBinary) and expr.op in _COMPARISONS | {"or"}:
        return [expr.left, expr.right]
    if isinstance(expr, EUnary):
        return [expr.operand]
    if isinstance(expr, ECall):
        return list(expr.args)
    return []


def _literal(expr: Expr) -> bool:
    return isinstance(expr, (ENum, EStr, EBool))


def _value(expr: Expr, env: Mapping[str, Any]) -> Any:
    try:
        return evaluate(expr, env)
    except NgrulesError as e:
        return f"<failed: {e.message}>"


def _true(value: Any) -> bool:
    try:
        return guard_truth(value)
    except NotBoolean:
        return False


def _quote(expr: Expr) -> str:
    from ngrules.lang.formatter import format_expr

    return format_expr(expr)
