"""Why a rule does not match: the closest partial matches, in terms of the rule's text.

For every node that could be the rule's root, a tracing twin of the reference matcher scores
how much of the pattern matched before the first element that failed (the nodes matched below
the root first, then the guards passed, then variables bound), and records that element (with
its source span), the node found there and why it was refused. A node refused only because a
layout view (`ReorderAxes`, `Broadcast`, ...) hides the op the pattern wants counts as nearly
matched, with a hint. The candidates that got furthest come first; ties in graph order. Only
the misses shown are put into words, so a query on a 10,000-node graph stays well under 100 ms
(bench/explain.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ngrules.engine.bindings import describe, false_guard_detail, format_bindings
from ngrules.engine.compiled import CompiledRule, compiled_for_checks, root_ops
from ngrules.engine.match import NODE_SCORE, trace_matches
from ngrules.engine.multiroot import Context
from ngrules.engine.reading import as_read
from ngrules.errors import NgrulesError, Span
from ngrules.ir.graph import Node, toposort
from ngrules.ir.ops import OPS
from ngrules.ir.symbolic import STAND_INS
from ngrules.ir.values import scalar_value
from ngrules.lang.rules import Rule
from ngrules.lang.shipped import short_location
from ngrules.lang.syntax import Guard, Let, PLit, PNamed, POp, PVar

#: How many layout views deep a miss looks for the op its pattern element wanted.
_VIEW_DEPTH = 3


@dataclass
class Miss:
    """The furthest a rule got at one candidate root, and what stopped it there: the pattern
    element or guard (`text`, at `span`) and the graph's node there (`node`, as `found`)."""

    root: Node
    score: int
    text: str
    span: Span | None
    found: str
    bindings: dict = field(default_factory=dict)
    node: Node | None = None

    def __str__(self) -> str:
        where = f" at {short_location(str(self.span))}" if self.span else ""
        return f"`{self.text}`{where}: {self.found}"


@dataclass
class Explanation:
    """The nodes a rule matches at (with the bindings of the first way), and the closest
    misses (furthest first). `names` has `%i Op(...)` for the nodes it shows."""

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


@dataclass
class _Failure:
    """A failure as the tracker keeps it: put into words only if it is shown."""

    score: int
    element: object
    why: str  # "op", "kind", "literal", "rebound", "view", or a sentence (guards, roots)
    node: Node | None
    bindings: dict
    under: tuple[str, ...] = ()  # with "view": the layout views over the op wanted


class _Tracker:
    """Keeps the failure that came after the highest score."""

    def __init__(self):
        self.best: _Failure | None = None

    def fail(self, score: int, element, why: str, bindings: dict, node=None, under=()) -> None:
        if self.best is None or score > self.best.score:
            self.best = _Failure(score, element, why, node, dict(bindings), under)

    def pattern_failed(self, score: int, p, why: str, node: Node, b: dict) -> None:
        if why == "op":
            near = _through_views(p, node, b)
            if near is not None:
                gain, under = near
                self.fail(score + gain - NODE_SCORE // 2, p, "view", b, node, under)
                return
        self.fail(score, p, why, b, node)


def _through_views(p, node: Node, b: dict) -> tuple[int, tuple[str, ...]] | None:
    """When layout views over a node of the op `p` wants are all that refused `node`: how much
    of `p` matches that node (its score) and the views' ops, else None."""
    if not isinstance(p, POp) or p.optional:
        return None
    under: list[str] = []
    while len(under) < _VIEW_DEPTH and len(node.args) == 1 and node.op != p.op:
        opdef = OPS.get(node.op)
        if opdef is None or not opdef.has("view"):
            return None
        under.append(node.op)
        node = node.args[0]
    if node.op != p.op or not under:
        return None
    inner = _Tracker()
    gain = max((s for _, s in trace_matches(p, node, b, 0, inner.pattern_failed)), default=0)
    return max(gain, inner.best.score if inner.best else 0), tuple(under)


def _axes(node: Node) -> str:
    """`[C:32, N:?]`: a symbolic dimension's stand-in length shown as `?`."""
    return "[" + ", ".join(
        f"{a.name}:{'?' if a.length in STAND_INS else a.length}" for a in node.axes) + "]"


def _words(f: _Failure, names) -> str:
    """Why the element refused the node, naming the node as the graph has it."""
    if f.node is None:
        return f.why
    found = f"{names(f.node)} {_axes(f.node)}" if f.node.outputs is None else names(f.node)
    p = f.element
    if f.why == "kind":
        return f"found {found}, which is not a {p.kind}"
    if f.why == "literal":
        held = scalar_value(f.node)  # the graph's value there, when it has one
        if held is not None:
            return f"found {found}, which is {held:g} everywhere, not {p.value:g}"
        return f"found {found}, not known to be {p.value:g} everywhere"
    if f.why == "rebound":
        return f"`{p.name}` is already {names(f.bindings[p.name])}, found {found}"
    if f.why == "view":
        views = "(".join(f"{v}?" for v in f.under)
        return (f"found {found}: a {p.op} under {', '.join(f.under)} (the pattern does not "
                f"look through layout views; `{views}({quote(p)}{')' * len(f.under)}` would, or "
                "the built-in pass canonical_layout first)")
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


def _miss_at(rule: CompiledRule, node: Node, ctx) -> _Failure | dict:
    """The bindings of the first way the rule matches at node, else its furthest failure."""
    tracker = _Tracker()
    for b, score in _trace(rule.rule.roots[0], node, {}, 0, tracker):
        for b2, s in _trace_roots(rule, b, score, tracker, ctx):
            env = _check_clauses(rule, b2, s, tracker)
            if env is not None:
                return env
    return tracker.best or _Failure(0, rule.rule.roots[0], "no match", None, {})


def explain(rule: Rule, outputs: Sequence[Node], limit: int = 3,
            read_by: Iterable[Rule] | None = None) -> Explanation:
    """Where `rule` matches in the graph of `outputs`, and why it fails at the closest misses.
    The graph is read as a rewrite's pass reads it by default (`reading.as_read`: the
    composites `read_by`, default the rule alone, read into lowered and laid out); the
    explanation's nodes are of that graph."""
    outputs = as_read(outputs, (rule,) if read_by is None else read_by)
    compiled = compiled_for_checks(rule)
    ctx = Context(outputs) if len(rule.roots) > 1 else None  # users: for further roots only
    order = ctx.order if ctx is not None else toposort(outputs)
    ops = root_ops(rule.roots[0])
    result = Explanation(rule)
    failures: list[tuple[Node, _Failure]] = []
    for node in order:
        if ops is not None and node.op not in ops:
            continue
        found = _miss_at(compiled, node, ctx)
        if isinstance(found, _Failure):
            failures.append((node, found))
        else:
            result.matches.append(node)
            result.bindings[node] = found
    failures.sort(key=lambda nf: -nf[1].score)  # stable: ties stay in graph order
    index: dict[Node, int] | None = None

    def name(node: Node) -> str:
        nonlocal index
        if node not in result.names:
            index = index if index is not None else {n: i for i, n in enumerate(order)}
            i = index.get(node)
            result.names[node] = describe(node) if i is None else f"%{i} {describe(node)}"
        return result.names[node]

    for node in result.matches[:5]:
        name(node)
    for node, f in failures[:limit]:
        text = quote(f.element)
        span = getattr(f.element, "span", None)
        result.misses.append(Miss(node, f.score, text, span, _words(f, name), f.bindings, f.node))
        name(node)
    return result
