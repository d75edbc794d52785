"""The rewrite driver: passes of rules applied to a graph, to a fixpoint.

Nodes are immutable and hash-consed, so a pass never edits the input: it walks the graph once
from the leaves up, rebuilding each node on its already-rewritten arguments and then applying
the pass's rules at it until none matches. A replacement's new nodes are normalised the same way
before it stands in for the matched node. Every node is rebuilt at most once per pass, so a pass
costs time linear in the graph plus the work of the rewrites themselves; only the region a
rewrite touched is revisited. Work is kept on an explicit stack (no recursion on graph depth).

Rules with several roots need the users of the nodes they bind, so they run between walks, on
a settled graph, one match at a time (all of a match's roots are replaced together).

Termination: a rewrite whose result is a node still being normalised would loop forever; the
engine stops with `stop == "cycle"` and names the rules that formed the cycle, in order. Fuel
bounds the total number of rewrites (`stop == "fuel"`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ngrules.engine.compiled import CompiledRule, RuleStats
from ngrules.errors import NgrulesError
from ngrules.ir.graph import Node, paused_gc, substitute, toposort, users_of, validate
from ngrules.ir.ops import did_you_mean
from ngrules.lang.rules import Rule, RuleSet


@dataclass(slots=True)
class Firing:
    """One rewrite: which rule, where it is written, what it matched and what it built."""

    rule: str
    location: str
    roots: tuple[Node, ...]
    replacements: tuple[Node, ...]
    new_nodes: tuple[Node, ...]
    pass_name: str

    @property
    def root(self) -> Node:
        return self.roots[0]


class RewriteResult:
    """The rewritten outputs, what fired, per-rule statistics and why rewriting stopped."""

    def __init__(
        self,
        outputs: list[Node],
        firings: list[tuple],
        stats: dict[str, RuleStats],
        passes: list[str],
    ):
        self.outputs = outputs
        self.stats = stats
        self.passes = passes
        self.stop = "fixpoint"
        self.cycle: tuple[str, ...] = ()
        self.message = ""
        self._firings = firings
        self._trace: list[Firing] | None = None

    @property
    def trace(self) -> list[Firing]:
        """Every rewrite in order (built on first use: recording stays cheap while rewriting)."""
        if self._trace is None:
            self._trace = [Firing(*f) for f in self._firings]
        return self._trace

    @property
    def warnings(self) -> list[str]:
        """One line per rule whose guards, lets or replacement failed to evaluate at some
        match (those matches were rejected, the rewrite went on): where, why, how often."""
        out = []
        for s in self.stats.values():
            if s.first_failure is not None:
                where = f"{s.first_failure.span}: " if s.first_failure.span else ""
                out.append(
                    f"{where}warning: {s.first_failure.message} "
                    f"(match rejected; {s.failures} rejected in all)"
                )
        return out

    def fired(self) -> dict[str, int]:
        """How many times each rule fired, in order of first firing."""
        counts: dict[str, int] = {}
        for f in self._firings:
            counts[f[0]] = counts.get(f[0], 0) + 1
        return counts

    def __repr__(self) -> str:
        return f"<RewriteResult stop={self.stop} rewrites={len(self._firings)}>"


class _Cycle(Exception):
    def __init__(self, rules: list[CompiledRule]):
        self.rules = rules


class _Budget:
    """Fuel shared by every pass of one rewrite call (default: set from the first walk)."""

    def __init__(self, fuel: int | None):
        self.left = fuel
        self.exhausted = False

    def size_for(self, nodes: int) -> None:
        if self.left is None:
            self.left = 10 * nodes + 10_000


class _Context:
    """What multi-root rules need from the settled graph: users and nodes by op."""

    def __init__(self, outputs: Sequence[Node]):
        self.users = users_of(outputs)
        self.by_op: dict[str, list[Node]] = {}
        for node in self.users:
            self.by_op.setdefault(node.op, []).append(node)

    def candidates(self, anchor, bindings) -> Iterable[Node]:
        """Nodes that could be a further root: users (to the anchor's depth) of a bound node."""
        if anchor is None:
            return [n for op in sorted(self.by_op) for n in self.by_op[op]]
        name, depth = anchor
        level = [bindings[name]]
        for _ in range(depth):
            seen: dict[Node, None] = {}
            for node in level:
                for user in self.users.get(node, ()):
                    seen[user] = None
            level = list(seen)
        return level


class _Pass:
    """One pass's rules, indexed by root op, with the pass-wide memo of normal forms."""

    def __init__(self, name: str, rules: list[CompiledRule], run: _Run):
        self.name, self.run = name, run
        self.single = [r for r in rules if not r.is_multi_root]
        self.multi = [r for r in rules if r.is_multi_root]
        self.memo: dict[Node, Node] = {}
        self._index: dict[str, list[CompiledRule]] = {}

    def rules_for(self, op: str) -> list[CompiledRule]:
        rules = self._index.get(op)
        if rules is None:
            rules = [r for r in self.single if r.root_ops is None or op in r.root_ops]
            self._index[op] = rules
        return rules

    # -- single-root rules: one walk from the leaves up ----------------------------------------
    def walk(self, outputs: Sequence[Node]) -> list[Node]:
        """Normal forms of the outputs. Arguments come first in topological order, so most
        nodes need no stack: only a rewrite's result is normalised on the explicit stack."""
        memo, index = self.memo, self._index
        order = toposort(outputs)
        self.run.budget.size_for(len(order))
        for node in order:
            args = node.args
            rebuilt = node.with_args(tuple([memo[a] for a in args])) if args else node
            done = memo.get(rebuilt)
            if done is None:
                rules = index.get(rebuilt.op)
                if rules is None:
                    rules = self.rules_for(rebuilt.op)
                rule, found = self._first_match(rebuilt, rules) if rules else (None, None)
                done = rebuilt if rule is None else self._result(found[1][0], rebuilt, rule)
                memo[rebuilt] = done
            memo[node] = done
        return [memo[o] for o in outputs]

    def _result(self, replacement: Node, rewritten: Node, rule: CompiledRule) -> Node:
        done = self.memo.get(replacement)
        return done if done is not None else self._normalize(replacement, rewritten, rule)

    def _normalize(self, replacement: Node, rewritten: Node, rule: CompiledRule) -> Node:
        """The normal form of a rule's result, standing in for `rewritten`."""
        memo = self.memo
        frames = [[rewritten, rewritten, replacement, rule]]  # node, rebuilt, waiting-on, rule
        active = {rewritten: 0}
        if replacement not in memo:
            self._push(frames, active, replacement)
        while frames:
            frame = frames[-1]
            node, waiting = frame[0], frame[2]
            if waiting is not None:
                done = memo.get(waiting)
                if done is not None:
                    self._finish(frames, active, done)
                    continue
            pending = next((a for a in node.args if a not in memo), None)
            if pending is not None:
                self._push(frames, active, pending)
                continue
            rebuilt = node.with_args(tuple([memo[a] for a in node.args])) if node.args else node
            frame[1] = rebuilt
            done = memo.get(rebuilt)
            if done is not None:
                self._finish(frames, active, done)
                continue
            active.setdefault(rebuilt, len(frames) - 1)
            frame[3], found = self._first_match(rebuilt, self.rules_for(rebuilt.op))
            if frame[3] is None:
                self._finish(frames, active, rebuilt)
                continue
            replacement = found[1][0]
            done = memo.get(replacement)
            if done is not None:
                self._finish(frames, active, done)
                continue
            frame[2] = replacement
            self._push(frames, active, replacement)
        return memo[rewritten]

    def _push(self, frames, active, node: Node) -> None:
        start = active.get(node)
        if start is not None:
            raise _Cycle([f[3] for f in frames[start:] if f[3] is not None])
        active[node] = len(frames)
        frames.append([node, None, None, None])

    def _finish(self, frames, active, result: Node) -> None:
        node, rebuilt = frames.pop()[:2]
        self.memo[node] = result
        if rebuilt is not None:
            self.memo[rebuilt] = result
            if active.get(rebuilt) == len(frames):
                del active[rebuilt]
        if active.get(node) == len(frames):
            del active[node]

    def _first_match(self, node: Node, rules, ctx=None):
        """The first of `rules` that matches at node, counted and recorded: (rule, found), or
        (None, None). found is (roots, replacements, new nodes)."""
        run = self.run
        if run.budget.exhausted:
            return None, None
        for rule in rules:
            stats = rule.stats
            stats.attempts += 1
            start = time.perf_counter()
            found = rule.apply(node, ctx)
            stats.seconds += time.perf_counter() - start
            if found is not None:
                stats.matches += 1
                run.record(self.name, rule, *found)
                return rule, found
        return None, None

    # -- multi-root rules: matched on a settled graph, applied together -----------------------
    def multi_round(self, outputs: list[Node]) -> dict[Node, Node]:
        """The roots of the first multi-root match on the settled graph, mapped to their
        replacements. One at a time: a replacement may contain another match's roots."""
        ctx = _Context(outputs)
        for node in toposort(outputs):
            rules = [r for r in self.multi if not r.root_ops or node.op in r.root_ops]
            rule, found = self._first_match(node, rules, ctx)
            if rule is not None:
                return dict(zip(found[0], found[1]))
        return {}

    def apply(self, outputs: list[Node]) -> list[Node]:
        outputs = self.walk(outputs)
        while self.multi and not self.run.budget.exhausted:
            chosen = self.multi_round(outputs)
            if not chosen:
                break
            outputs = self.walk(substitute(outputs, chosen))
        return outputs


class _Run:
    """State shared by the passes of one rewrite call: fuel, trace, checking."""

    def __init__(self, fuel: int | None, checked: bool):
        self.budget = _Budget(fuel)
        self.checked = checked
        self.trace: list[Firing] = []

    def record(self, pass_name: str, rule: CompiledRule, roots, replacements, new_nodes) -> None:
        for n in new_nodes:
            if n.origin is None:
                n.origin = rule.rule
        if self.checked:
            validate(replacements)
        self.trace.append((rule.name, rule.location, roots, replacements, new_nodes, pass_name))
        self.budget.left -= 1
        if self.budget.left <= 0:
            self.budget.exhausted = True


_compiled: dict[int, tuple[Rule, CompiledRule]] = {}


def _compile(rule: Rule) -> CompiledRule:
    """Compile a rule once; stats are reset per rewrite call by the caller."""
    entry = _compiled.get(id(rule))
    if entry is None or entry[0] is not rule:
        entry = (rule, CompiledRule(rule))
        _compiled[id(rule)] = entry
    return entry[1]


def _pass_names(rules: RuleSet, pipeline: str | None, passes: Sequence[str] | None) -> list[str]:
    if pipeline is not None and passes is not None:
        raise NgrulesError("give a pipeline or a list of passes, not both")
    if pipeline is not None:
        if pipeline not in rules.pipelines:
            hint = did_you_mean(pipeline, rules.pipelines)
            raise NgrulesError(f"no pipeline named {pipeline!r}{hint}")
        return list(rules.pipelines[pipeline])
    names = list(passes) if passes is not None else list(rules.passes)
    for name in names:
        if name not in rules.passes:
            raise NgrulesError(f"no pass named {name!r}{did_you_mean(name, rules.passes)}")
    return names


def _as_ruleset(rules: RuleSet | Rule | Iterable[Rule]) -> RuleSet:
    if isinstance(rules, RuleSet):
        return rules
    rules = (rules,) if isinstance(rules, Rule) else tuple(rules)
    grouped: dict[str, list[Rule]] = {}
    for r in rules:
        grouped.setdefault(r.pass_name, []).append(r)
    passes = {k: tuple(sorted(v, key=lambda r: (-r.priority, r.order))) for k, v in grouped.items()}
    return RuleSet(rules, passes, {})


def rewrite(
    outputs: Sequence[Node],
    rules: RuleSet | Rule | Iterable[Rule],
    pipeline: str | None = None,
    passes: Sequence[str] | None = None,
    fuel: int | None = None,
    checked: bool = False,
) -> RewriteResult:
    """Apply passes of rules to the graph of `outputs`; the input graph is never changed.

    pipeline names a pipeline of the rule set; passes lists pass names; with neither, every
    pass runs in declaration order. fuel bounds the number of rewrites (default: ten per node
    plus 10,000). checked re-infers each replacement's nodes and validates the whole graph
    after each pass.
    """
    ruleset = _as_ruleset(rules)
    names = _pass_names(ruleset, pipeline, passes)
    with paused_gc():
        return _rewrite(outputs, ruleset, names, fuel, checked)


def _rewrite(outputs, ruleset: RuleSet, names: list[str], fuel, checked) -> RewriteResult:
    current = list(outputs)
    if checked:
        validate(current)
    run = _Run(fuel, checked)
    stats: dict[str, RuleStats] = {}
    result = RewriteResult(current, run.trace, stats, names)
    for name in names:
        compiled = [_compile(r) for r in ruleset.passes[name]]
        for c in compiled:
            c.stats = stats.setdefault(c.name, RuleStats())
        try:
            current = _Pass(name, compiled, run).apply(current)
        except _Cycle as cycle:
            return _stopped_by_cycle(result, current, cycle, name)
        if checked:
            validate(current)
        if run.budget.exhausted:
            result.outputs, result.stop = current, "fuel"
            result.message = f"fuel ran out after {len(run.trace)} rewrites in pass {name}"
            return result
    result.outputs = current
    return result


def _stopped_by_cycle(result: RewriteResult, current, cycle: _Cycle, pass_name: str):
    """The graph as it was before the pass, and the rules that formed the cycle."""
    names = tuple(r.name for r in cycle.rules)
    where = ", ".join(f"{r.name} ({r.location})" for r in cycle.rules)
    result.outputs, result.stop, result.cycle = current, "cycle", names
    result.message = (
        f"rules cycle in pass {pass_name}: {where} lead back to a node they started from"
    )
    return result
