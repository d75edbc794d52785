"""Why a rule does not match: the closest partial matches, in terms of the rule's text.

For every node that could be the rule's root, a tracing twin of the reference matcher counts
how many pattern elements matched before the first one that failed, and records that element
(with its source span), the node found there and why it was refused. Guards are evaluated once
the pattern matches, and a false one is reported the same way. The candidates that got furthest
come first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ngrules.engine.bindings import describe, false_guard_detail, format_bindings
from ngrules.engine.compiled import CompiledRule, compiled_for_checks, root_ops
from ngrules.engine.match import trace_matches
from ngrules.engine.multiroot import Context
from ngrules.errors import NgrulesError, Span
from ngrules.ir.graph import Node, toposort
from ngrules.lang.rules import Rule
from ngrules.lang.shipped import short_location
from ngrules.lang.syntax import Guard, Let, PLit, PNamed, POp, PVar


@dataclass
class Miss:
    """The furthest a rule got at one candidate root, and what stopped it there."""

    root: Node
    score: int
    text: str
    span: Span | None
    found: str
    bindings: dict = field(default_factory=dict)

    def __str__(self) -> str:
        where = f" at {short_location(str(self.span))}" if self.span else ""
        return f"`{self.text}`{where}: {self.found}"


@dataclass
class Explanation:
    """The nodes a rule matches at (with the bindings of the first way), and the closest
    misses (furthest first)."""

    rule: Rule
    matches: list[Node] = field(default_factory=list)
    misses: list[Miss] = field(default_factory=list)
    names: dict[Node, str] = field(default_factory=dict)
    bindings: dict[Node, dict] = field(default_factory=dict)

    def __str__(self) -> str:
        head = f"rule {self.rule.name} ({self.rule.location})"
        lines = [f"{head}: matches at {len(self.matches)} node(s)"]
        for node in self.matches[:5]:
            lines.append(f"  matches {self.names.get(node, describe(node))}")
            bound = self.bindings.get(node) if len(self.rule.roots) == 1 else None
            if bound:
                lines.append(f"    bindings: {format_bindings(bound)}")
        if not self.matches and not self.misses:
            lines.append("  no node has the op its pattern starts with")
        for miss in self.misses:
            lines.append(f"  at {self.names.get(miss.root, describe(miss.root))}: {miss}")
            if miss.bindings:
                lines.append(f"    bindings so far: {format_bindings(miss.bindings)}")
        return "\n".join(lines)


def quote(element) -> str:
    """The source text of a pattern element or guard, from its span."""
    span = getattr(element, "span", None)
    if span is not None and span.source_line and span.end_line == span.line:
        text = span.source_line[span.col - 1 : span.end_col - 1].strip()
        if text:
            return text
    from ngrules.lang.formatter import format_expr, format_pattern

    if isinstance(element, (Guard, Let)):
        element = element.expr
    is_pattern = isinstance(element, (PVar, PLit, POp, PNamed))
    return format_pattern(element) if is_pattern else format_expr(element)


class _Tracker:
    """Keeps the failure that came after the most matched elements, as text."""

    def __init__(self):
        self.best: tuple[int, object, str, dict] | None = None

    def fail(self, score: int, element, reason: str, bindings: dict) -> None:
        if self.best is None or score > self.best[0]:
            self.best = (score, element, reason, dict(bindings))

    def pattern_failed(self, score: int, p, why: str, node: Node, b: dict) -> None:
        if self.best is None or score > self.best[0]:
            self.fail(score, p, _reason(p, why, node, b), b)


def _reason(p, why: str, node: Node, b: dict) -> str:
    found = describe(node)
    if why == "kind":
        return f"found {found}, which is not a {p.kind}"
    if why == "literal":
        return f"found {found}, not known to be {p.value:g} everywhere"
    if why == "rebound":
        return f"`{p.name}` is already {describe(b[p.name])}, found {found}"
    return f"found {found}"


def _trace(p, node: Node, b: dict, score: int, t: _Tracker):
    return trace_matches(p, node, b, score, t.pattern_failed)


def _check_clauses(rule: CompiledRule, b: dict, score: int, t: _Tracker) -> dict | None:
    """Evaluate lets and guards as the engine would: the bindings with the lets if every guard
    holds, else None (the first false or failing one logged)."""
    env = dict(b)
    for clause in rule.rule.clauses:
        try:
            if isinstance(clause, Let):
                env[clause.name] = rule._eval(clause.expr, env)
            elif not rule._holds(clause, env):
                detail = false_guard_detail(clause, env)
                t.fail(score, clause.expr, f"the guard is false{detail}", env)
                return None
        except NgrulesError as e:
            t.fail(score, getattr(clause, "expr", clause), f"failed: {e.message}", env)
            return None
        score += 1
    return env


def _trace_roots(rule: CompiledRule, b: dict, score: int, t: _Tracker, ctx, i: int = 1):
    """Match the further roots of a multi-root rule among the users of bound nodes."""
    if i == len(rule.matchers):
        yield b, score
        return
    candidates = list(ctx.candidates(rule.anchors[i], b))
    if not candidates:
        t.fail(score, rule.rule.roots[i], "no candidate node uses the nodes bound so far", b)
    for node in candidates:
        for b2, s in _trace(rule.rule.roots[i], node, b, score, t):
            yield from _trace_roots(rule, b2, s, t, ctx, i + 1)


def _miss_at(rule: CompiledRule, node: Node, ctx) -> Miss | dict:
    """The bindings of the first way the rule matches at node, else its furthest failure."""
    tracker = _Tracker()
    for b, score in _trace(rule.rule.roots[0], node, {}, 0, tracker):
        for b2, s in _trace_roots(rule, b, score, tracker, ctx):
            env = _check_clauses(rule, b2, s, tracker)
            if env is not None:
                return env
    score, element, reason, bound = tracker.best or (0, rule.rule.roots[0], "no match", {})
    return Miss(node, score, quote(element), getattr(element, "span", None), reason, bound)


def explain(rule: Rule, outputs: Sequence[Node], limit: int = 3) -> Explanation:
    """Where `rule` matches in the graph of `outputs`, and why it fails at the closest misses."""
    compiled, ctx = compiled_for_checks(rule), Context(outputs)
    ops = root_ops(rule.roots[0])
    order = toposort(outputs)
    result = Explanation(rule, names={n: f"%{i} {describe(n)}" for i, n in enumerate(order)})
    misses = []
    for node in order:
        if ops is not None and node.op not in ops:
            continue
        miss = _miss_at(compiled, node, ctx)
        if isinstance(miss, Miss):
            misses.append(miss)
        else:
            result.matches.append(node)
            result.bindings[node] = miss
    misses.sort(key=lambda m: -m.score)
    result.misses = misses[:limit]
    return result
