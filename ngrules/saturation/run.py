"""`saturate`: rules applied into an e-graph until nothing changes or a limit, then the
cheapest equal graph extracted.

Each iteration finds every new match on the e-graph as it stands (`matching`), then adds each
replacement and joins it with the matched class, then restores congruence (`EGraph.rebuild`).
Nothing is removed, so rules that would loop or grow forever in a greedy rewrite
(commutativity, associativity, distribution and factoring together) are allowed: the limits
stop them, and extraction takes the best graph found so far.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ngrules.budget import DEFAULT_BUDGET, Budget, Meter
from ngrules.engine.compiled import RuleCache
from ngrules.engine.folding import PASS_NAME as FOLD
from ngrules.engine.passes import as_ruleset, pass_names
from ngrules.engine.reading import as_read
from ngrules.errors import NgrulesError
from ngrules.ir import composite
from ngrules.ir.canonical import PASS_NAME as CANONICAL
from ngrules.ir.canonical import canonical_layout
from ngrules.ir.graph import Node, creation_order, paused_gc
from ngrules.lang.rules import BUILTIN_PASSES, Rule, RuleSet
from ngrules.saturation import ITERATIONS, MAX_ENODES, SECONDS
from ngrules.saturation.admit import Admission, admit
from ngrules.saturation.costs import graph_cost
from ngrules.saturation.egraph import EGraph
from ngrules.saturation.extract import Extraction, build, extract
from ngrules.saturation.folding import FoldRule
from ngrules.saturation.matching import Searcher, Shape, value_shape
from ngrules.saturation.multiroot import MultiRoot

#: What one e-node holds, in bytes (its term, its class's entries), charged to the budget.
ENODE_BYTES = 768

#: Rules compiled once per process (generating a rule's matcher costs more than most uses).
_COMPILED = RuleCache()


@dataclass
class SaturationResult:
    """The extracted outputs and how they were found.

    stop: "saturated" (no rule changes the e-graph any more), or the limit that stopped it:
    "enodes", "iterations" or "time" (the outputs are then the best graph found so far).
    provenance: for each node of the outputs that a rule built, that rule.
    """

    outputs: list[Node]
    stop: str
    iterations: int
    enodes: int
    classes: int
    seconds: float
    extraction: Extraction
    cost_before: float
    admission: Admission
    applied: dict[str, int] = field(default_factory=dict)  # matches that changed the e-graph
    provenance: dict[Node, Rule | str] = field(default_factory=dict)  # str: fold_constants
    capped: int = 0  # classes whose views were capped (`matching.VIEW_CAP`)
    extract_seconds: float = 0.0
    egraph: EGraph | None = field(default=None, repr=False)  # for explanations and pictures
    roots: list[int] = field(default_factory=list)  # the outputs' classes in `egraph`

    @property
    def cost_after(self) -> float:
        return self.extraction.cost

    @property
    def warnings(self) -> list[str]:
        return list(self.admission.warnings)

    @property
    def message(self) -> str:
        """Why it stopped, in words."""
        limits = {
            "enodes": "the e-node limit",
            "iterations": "the iteration limit",
            "time": "the time limit",
        }
        if self.stop == "saturated":
            return f"saturated after {self.iterations} iterations"
        return (
            f"stopped at {limits[self.stop]} after {self.iterations} iterations; "
            "the best graph found so far was extracted"
        )

    def __repr__(self) -> str:
        return (
            f"<SaturationResult stop={self.stop} enodes={self.enodes} "
            f"cost {self.cost_before:g} -> {self.cost_after:g} ({self.extraction.method})>"
        )


def _chosen_rules(ruleset: RuleSet, pipeline, passes) -> tuple[list[Rule], set[str]]:
    """The rules of the passes named (or of every pass), each once; and the built-in passes
    among them (`fold_constants`, `canonical_layout`)."""
    if pipeline is None and passes is None:
        return list(ruleset.rules), set()
    names = pass_names(ruleset, pipeline, passes)
    seen: dict[int, Rule] = {}
    for name in names:
        if name in BUILTIN_PASSES:
            continue
        for rule in ruleset.passes.get(name, ()):
            seen.setdefault(id(rule), rule)
    return list(seen.values()), {n for n in names if _builtin(n)}


def _builtin(name: str) -> bool:
    return name in BUILTIN_PASSES or composite.pass_ops(name) is not False


def _lowered(builtins: set[str]) -> list[str] | None | bool:
    """The composite ops the `decompose` passes among `builtins` lower (None: every one), or
    False when there is none."""
    found = [composite.pass_ops(n) for n in builtins if composite.pass_ops(n) is not False]
    if not found:
        return False
    return None if None in found else sorted({op for ops in found for op in ops})


def saturate(
    outputs: Sequence[Node],
    rules: RuleSet | Rule | Iterable[Rule],
    pipeline: str | None = None,
    passes: Sequence[str] | None = None,
    *,
    max_enodes: int = MAX_ENODES,
    seconds: float = SECONDS,
    iterations: int = ITERATIONS,
    unverified: bool = False,
    verdicts: Mapping[str, str] | None = None,
    use_z3: bool | None = None,
    fold_limit: int | None = None,
    budget: Budget | None = None,
    **verify_options,
) -> SaturationResult:
    """Apply the rules (of the pipeline or passes named, else all) into an e-graph of the
    outputs' graph until saturation or a limit, then extract the cheapest equal graph.

    Only rules verified or proved enter (verdicts: rule name -> status already known, or a
    VerificationReport; else the verdict cache, else `verify` now, with verify_options);
    `unverified` lets the others in, with a warning naming them (`result.warnings`).
    use_z3: see `extract.extract`. When the passes include the built-in `fold_constants`,
    constant terms are folded in the e-graph (values of at most fold_limit elements); with
    `canonical_layout`, the input with its layout views gathered enters beside the input.
    `budget` bounds the whole job after admission (`ngrules.budget`: 2 GiB, 120 s by default;
    its e-nodes and folded values, checked each iteration and every 256 matches applied):
    past it, `BudgetExceeded`, where `seconds` only stops the search and extracts.
    """
    if max_enodes < 1 or seconds <= 0 or iterations < 0:
        raise NgrulesError("saturation limits must be positive")
    if verdicts is not None and hasattr(verdicts, "verdicts"):  # a VerificationReport
        verdicts = {v.rule.name: v.status for v in verdicts.verdicts}
    chosen, builtins = _chosen_rules(as_ruleset(rules), pipeline, passes)
    admission = admit(chosen, unverified, verdicts, **verify_options)
    limits = (max_enodes, seconds, iterations)
    spend = _Spending(Meter(budget or DEFAULT_BUDGET, "rewrite"))
    with paused_gc():
        return _saturate(list(outputs), admission, limits, use_z3, builtins, fold_limit, spend)


class _Spending:
    """The saturation's budget: its time checked, the e-nodes added since the last check
    charged."""

    def __init__(self, meter: Meter):
        self.meter, self.counted = meter, 0

    def __call__(self, eg: EGraph, what: str) -> None:
        self.meter.check_time(what)
        self.meter.charge((len(eg) - self.counted) * ENODE_BYTES, f"{what} ({len(eg)} e-nodes)")
        self.counted = len(eg)


def _join_bodies(eg: EGraph, outputs: Sequence[Node]) -> None:
    """Each lowered body in the graph of outputs joined with its composite node on the same
    arguments: a rule's result over a body's value can then be read from the node kept whole
    (one kernel where its body is several)."""
    for node in creation_order(outputs):
        whole = composite.recorded(node)
        if whole is not None and whole.axes == node.axes and whole.dtype == node.dtype:
            eg.union(eg.add(node), eg.add(whole, composite.PASS_NAME))


def _beside(eg: EGraph, roots: Sequence[int], graph: Iterable[Node], source: str) -> None:
    """An equal graph of the outputs (one term per root) added, each term joined with its
    root's class, the join recorded as `source`'s."""
    for root, term in zip(roots, graph):
        built = eg.add(term, source)
        if eg.union(root, built):
            eg.history.append((source, root, built, eg.created))


def _apply(eg: EGraph, matches, applied: dict[str, int], max_enodes: int, deadline: float,
           spend: _Spending):
    """Add each match's replacement and join it with the matched class, until the e-node
    limit; whether the deadline cut it short (the matches not applied are dropped: each was
    optional)."""
    for k, m in enumerate(matches):
        before = len(eg)
        built = eg.add(m.replacement, m.rule.rule)
        if eg.union(m.cls, built) or len(eg) > before:
            applied[m.rule.name] = applied.get(m.rule.name, 0) + 1
            eg.history.append((m.rule.rule, m.cls, built, eg.created))
        if len(eg) >= max_enodes:
            return False
        if k % 256 == 255:
            spend(eg, "saturating")
            if time.perf_counter() > deadline:
                return True
    return False


def _saturate(outputs, admission, limits, use_z3, builtins, fold_limit,
              spend: _Spending) -> SaturationResult:
    max_enodes, seconds, iterations = limits
    start = time.perf_counter()
    deadline = start + seconds
    hard = start + spend.meter.deadline - time.monotonic()  # the budget's, on this clock
    eg = EGraph()
    roots = [eg.add(o) for o in outputs]
    lowered = _lowered(builtins)
    if lowered is not False:  # the composites lowered to their bodies: an equal graph beside
        bodies = composite.decompose(outputs, lowered)
        _beside(eg, roots, bodies, composite.PASS_NAME)
        _join_bodies(eg, bodies)
    if lowered is False and CANONICAL not in builtins:  # by default: as the rules read it
        read = as_read(outputs, admission.rules)
        _beside(eg, roots, read, CANONICAL)
        _join_bodies(eg, read)
    if CANONICAL in builtins:  # the input with its layout views gathered: an equal graph
        _beside(eg, roots, canonical_layout(outputs), CANONICAL)
    eg.rebuild()
    rules = [_COMPILED(r) for r in admission.rules if len(r.roots) == 1]
    multi = MultiRoot([_COMPILED(r) for r in admission.rules if len(r.roots) > 1])
    folding = FoldRule(Shape(None, rest=value_shape()), fold_limit, spend.meter)
    searcher = Searcher(rules + [folding] if FOLD in builtins else rules)
    applied: dict[str, int] = {}
    stop, done = "iterations", 0
    if len(eg) >= max_enodes:  # the input alone fills the e-graph
        stop, iterations = "enodes", 0
    affected = None  # the first search looks everywhere; later ones where views changed
    eg.touched.clear()
    while done < iterations:
        spend(eg, f"saturation iteration {done + 1}")  # a lost Ctrl-C raised here too
        created, unions = eg.created, eg.unions
        matches, late = searcher.search(eg, min(deadline, hard), affected)
        spend(eg, "saturating")  # past the budget's time: refused, not extracted
        done += 1
        late = _apply(eg, matches, applied, max_enodes, deadline, spend) or late
        eg.rebuild()
        if not late and len(eg) < max_enodes and multi.rules:
            multi.apply(eg, roots, applied)
            eg.rebuild()
        if len(eg) >= max_enodes:
            stop = "enodes"
            break
        if late or time.perf_counter() > deadline:
            stop = "time"
            break
        if eg.created == created and eg.unions == unions:
            stop = "saturated"
            break
        affected = eg.affected(searcher.reach)
    spent = time.perf_counter() - start
    spend(eg, "before extraction")
    extraction = extract(eg, roots, use_z3)
    extraction.outputs, provenance = build(eg, extraction.choice, roots)
    if composite.RECOMPOSE in builtins:  # bodies no rule changed written as their op again
        extraction.outputs = composite.recompose(extraction.outputs)
    return SaturationResult(
        extraction.outputs, stop, done, len(eg), len(eg.classes), spent, extraction,
        graph_cost(outputs), admission, applied, provenance, searcher.capped,
        time.perf_counter() - start - spent, eg, roots,
    )
