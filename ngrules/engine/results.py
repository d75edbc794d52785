"""What a rewrite returns and records: the rewritten outputs, each firing, per-rule statistics,
why it stopped; and the state shared by the passes of one rewrite call (fuel, trace)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ngrules.engine.compiled import CompiledRule, RuleStats
from ngrules.ir.graph import Node, validate
from ngrules.lang.shipped import short_location

if TYPE_CHECKING:
    from ngrules.engine.normalize import Cycle


class Budget:
    """Fuel shared by every pass of one rewrite call (default: set from the first walk)."""

    def __init__(self, fuel: int | None):
        self.left = fuel
        self.exhausted = False

    def size_for(self, nodes: int) -> None:
        if self.left is None:
            self.left = 10 * nodes + 10_000


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
        run: Run,
        stats: dict[str, RuleStats],
        passes: list[str],
    ):
        self.outputs = outputs
        self.stats = stats
        self.passes = passes
        self.stop = "fixpoint"
        self.cycle: tuple[str, ...] = ()
        self.message = ""
        #: (node, constant) for each node the built-in pass `fold_constants` evaluated
        self.folded: list[tuple[Node, Node]] = []
        self._run = run
        self._firings = run.trace
        self._trace: list[Firing] | None = None

    @property
    def rounds(self) -> int:
        """Rounds of multi-root matching, over every pass (each one walk over the graph)."""
        return self._run.rounds

    @property
    def trace(self) -> list[Firing]:
        """Every rewrite in order (built on first use: recording stays cheap while rewriting)."""
        if self._trace is None:
            self._trace = [_firing(*f) if len(f) == 7 else _returned(*f) for f in self._firings]
        return self._trace

    @property
    def warnings(self) -> list[str]:
        """One line per rule whose guards, lets or replacement failed to evaluate at some
        match (those matches were rejected, the rewrite went on): where, why, how often."""
        out = []
        for s in self.stats.values():
            if s.first_failure is not None:
                span = s.first_failure.span  # a shipped rule's as ngrules:rules/...
                where = f"{short_location(str(span))}: " if span else ""
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


def _firing(rule, location, roots, replacements, new_nodes, pass_name, pending) -> Firing:
    """A recorded rewrite, its roots rebuilt if they were pending when it fired."""
    if pending:
        roots = tuple(pending.rebuild(r) if r in pending else r for r in roots)
    return Firing(rule, location, roots, replacements, new_nodes, pass_name)


def _returned(rule, location, root, replacement, pass_name, pending) -> Firing:
    """A recorded `=> x` rewrite, kept as one short tuple (see `dispatch`): it built nothing.
    A root replaced before it was built comes with its view: `pending` is (pending, view)."""
    if pending.__class__ is tuple:
        pending, view = pending
        root = pending.rebuild_on(root, view)
        if replacement in pending:  # read through a view, never needed built
            replacement = pending.force(replacement)
        pending = None
    return _firing(rule, location, (root,), (replacement,), (), pass_name, pending)


#: `node.origin = rule` without `Node.__setattr__`'s check (a Python call per new node); the
#: generated dispatch records a match with it too
set_origin = object.__setattr__


class Run:
    """State shared by the passes of one rewrite call: fuel, trace, checking."""

    def __init__(self, fuel: int | None, checked: bool, timed: bool = False):
        self.budget = Budget(fuel)
        self.checked = checked
        self.timed = timed
        #: Firing's fields and the pending nodes of its pass; (rule, location, root, replacement,
        #: pass, pending) for a `=> x` rule's firing, (..., (pending, view)) for one at a root
        #: not built (see `dispatch.first_on_view`)
        self.trace: list[tuple] = []
        self.rounds = 0  # multi-root rounds, over every pass

    def record(
        self, pass_name: str, rule: CompiledRule, roots, replacements, new_nodes, pending=None
    ) -> None:
        for n in new_nodes:
            if n.origin is None:
                set_origin(n, "origin", rule.rule)
        if self.checked:
            validate(replacements)
        if not pending or pending.keys().isdisjoint(roots):
            pending = None  # kept only to rebuild a pending root when the trace is read
        self.trace.append(
            (rule.name, rule.location, roots, replacements, new_nodes, pass_name, pending)
        )
        self.budget.left -= 1
        if self.budget.left <= 0:
            self.budget.exhausted = True


def stopped_by_cycle(result: RewriteResult, current, cycle: Cycle, pass_name: str):
    """`result` stopped by a rules cycle (`normalize.Cycle`) in a pass: the graph as it was
    before the pass, and the rules that formed the cycle."""
    names = tuple(r.name for r in cycle.rules)
    where = ", ".join(f"{r.name} ({r.location})" for r in cycle.rules)
    result.outputs, result.stop, result.cycle = current, "cycle", names
    result.message = (
        f"rules cycle in pass {pass_name}: {where} lead back to a node they started from"
    )
    return result
