"""What a rewrite returns and records: the rewritten outputs, each firing, per-rule statistics,
why it stopped; and the state shared by the passes of one rewrite call (fuel, trace)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

from ngrules.budget import DEFAULT_BUDGET, Budget, Meter
from ngrules.engine.compiled import CompiledRule, RuleStats
from ngrules.ir.graph import Node, validate
from ngrules.lang.shipped import short_location

#: Rewrites between two checks of the job's budget: its time, and the memory its rewrites took.
CHUNK = 256
#: What a rewrite's record holds, and each node it builds, in bytes (tracemalloc: 1.3 kB for a
#: rewrite that builds three nodes); a built constant's array counts as well.
FIRING_BYTES, NODE_BYTES = 256, 384

if TYPE_CHECKING:
    from ngrules.engine.normalize import Cycle


class Fuel:
    """Fuel shared by every pass of one rewrite call (default: set from the first walk), spent
    in chunks of `CHUNK` rewrites: between two, the job's `Meter` checks its time and charges
    what the chunk's rewrites built (the generated dispatch spends it as `Run.record` does)."""

    def __init__(self, fuel: int | None, meter: Meter, trace: list[tuple]):
        self.meter, self._trace, self._seen = meter, trace, 0
        self.reserve, self.left = fuel, None
        self.exhausted = False
        if fuel is not None:
            self._refill()

    def size_for(self, nodes: int) -> None:
        if self.left is None:
            self.reserve = 10 * nodes + 10_000
            self._refill()

    def _refill(self) -> None:
        self.left = min(self.reserve, CHUNK) if self.reserve > 0 else self.reserve
        self.reserve -= self.left

    def spent_chunk(self) -> None:
        """The chunk's rewrites are done: the budget checked, then the next chunk, if fuel is
        left (else `exhausted`)."""
        self.settle("rewriting")
        if self.reserve > 0:
            self._refill()
        else:
            self.exhausted = True

    def paced(self, nodes: list[Node], what: str) -> Iterator[Node]:
        """A walk's nodes, the budget settled before every `CHUNK` of them: a walk that
        rewrites nothing may still match for long (guards that fail, many argument orders).
        The nodes of a chunk are iterated by `chain` (no generator step per node)."""
        return chain.from_iterable(self._chunks(nodes, what))

    def _chunks(self, nodes: list[Node], what: str) -> Iterator[list[Node]]:
        for start in range(0, len(nodes), CHUNK):
            self.settle(what)
            yield nodes[start:start + CHUNK]

    def settle(self, what: str) -> None:
        """Check the job's time and charge what the rewrites since the last check built."""
        trace, meter = self._trace, self.meter
        meter.check_time(what)
        new = trace[self._seen:]
        self._seen = len(trace)
        nbytes = FIRING_BYTES * len(new)
        for f in new:
            if len(f) == 7:  # (rule, location, roots, replacements, new nodes, ...)
                nbytes += sum(_held(n) for n in f[4])
        meter.charge(nbytes, f"{what} ({len(trace)} rewrites)")


def _held(node: Node) -> int:
    if node.op == "Constant":
        return NODE_BYTES + getattr(node.attrs.get("value"), "nbytes", 0)
    return NODE_BYTES


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
        """Rounds of multi-root matching, over every pass (each one walk over the graph; a
        pass that cannot match counts its one round unwalked: `presence`)."""
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

    def locations(self) -> dict[str, str]:
        """Each rule that fired -> where it is written, from the firings as recorded (the
        trace is not built: that rebuilds the roots that were pending when they fired)."""
        return {f[0]: f[1] for f in self._firings}

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

    def __init__(self, fuel: int | None, checked: bool, timed: bool = False,
                 budget: Budget | None = None):
        self.checked = checked
        self.timed = timed
        #: Firing's fields and the pending nodes of its pass; (rule, location, root, replacement,
        #: pass, pending) for a `=> x` rule's firing, (..., (pending, view)) for one at a root
        #: not built (see `dispatch.first_on_view`)
        self.trace: list[tuple] = []
        self.rounds = 0  # multi-root rounds, over every pass
        #: the fuel, and the rewrite's `Meter` of `budget` (`ngrules.budget`) that it checks
        self.budget = Fuel(fuel, Meter(budget or DEFAULT_BUDGET, "rewrite"), self.trace)

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
            self.budget.spent_chunk()


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
