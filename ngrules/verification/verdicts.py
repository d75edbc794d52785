"""Verdicts: what verifying (or proving) a rule found, in words, with a counterexample.

| status       | meaning                                                    | fails a run |
|--------------|------------------------------------------------------------|-------------|
| `wrong`      | values or derivatives differ on a counterexample           | yes         |
| `ill-formed` | the replacement cannot be built, or changes axes or dtype  | yes         |
| `loops`      | the rule alone does not terminate (a warning, with cycle)  | no          |
| `unverified` | too few instances could be built; the reason says why      | no          |
| `verified`   | right on every instance tried                              | no          |
| `proved`     | an SMT proof, for all inputs and every shape               | no          |
| `proved-reals` | an SMT proof for real numbers; the ops round in floats   | no          |
| `proved-bounded` | proved for every shape of ranks <= R, lengths <= L; tested | no      |
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ngrules.ir.graph import Node, format_graph, toposort
from ngrules.lang.assumptions import describe
from ngrules.lang.rules import Rule

if TYPE_CHECKING:
    from ngrules.verification.instances import Instance

STATUSES = ("wrong", "ill-formed", "loops", "unverified", "verified", "proved-bounded",
            "proved-reals", "proved")
#: The statuses of a proof: `proved` holds for IEEE floats, `proved-reals` for real numbers.
PROVED = frozenset({"proved", "proved-reals"})
FAILING = frozenset({"wrong", "ill-formed"})


def indent(text: str, pad: str = "    ") -> str:
    return "\n".join(pad + line for line in text.splitlines())


def _array(value: np.ndarray) -> str:
    return np.array2string(np.asarray(value), precision=4, separator=", ", threshold=64)


def _axes_line(nodes: Sequence[Node]) -> str:
    seen: dict[str, int] = {}
    for node in toposort(nodes):
        for ax in node.axes.leaves() if node.outputs is None else ():
            seen.setdefault(ax.name, ax.length)
    return ", ".join(f"{n}={k}" for n, k in seen.items()) or "none (every tensor is a scalar)"


def ill_formed(inst: Instance) -> str | None:
    """Why the rewrite of an instance is ill-formed: it raised, or changed an output's axes or
    dtype (None: it did neither). The verifier and the prover judge every instance by it."""
    if inst.error is not None:
        return f"the replacement cannot be built: {inst.error}"
    for i, (a, b) in enumerate(zip(inst.outputs, inst.after)):
        if a.outputs is None and (a.axes != b.axes or a.axes.lengths != b.axes.lengths):
            return f"the replacement changes output {i}'s axes from {a.axes!r} to {b.axes!r}"
        if a.dtype != b.dtype:
            return f"the replacement changes output {i}'s dtype from {a.dtype} to {b.dtype}"
    return None


@dataclass
class Counterexample:
    """A (shrunk) instance on which a rule is wrong, with everything needed to replay it."""

    rule: Rule | None
    before: list[Node]
    feeds: dict[Node, np.ndarray]
    problem: str
    after: list[Node] | None = None
    expected: list[np.ndarray] | None = None
    got: list[np.ndarray] | None = None
    note: str = ""

    def _inputs(self) -> list[str]:
        return [
            f"{node.name} {node.axes!r} = {_array(value)}"
            for node, value in sorted(self.feeds.items(), key=lambda kv: kv[0].name)
        ]

    def __str__(self) -> str:
        if self.rule is None:
            lines = ["the rewrite changes results:"]
        else:
            lines = [f"counterexample for rule {self.rule.name} ({self.rule.location}):"]
            lines += [indent(self.rule.source)] if self.rule.source else []
        lines += ["  instance:", indent(format_graph(self.before))]
        if self.after is not None:
            lines += ["  rewritten to:", indent(format_graph(self.after))]
        lines += [f"  axes: {_axes_line(self.before)}", "  inputs:"]
        lines += [indent(s) for s in self._inputs()] or ["    none"]
        if self.expected is not None:
            lines += [f"  before: {_array(v)}" for v in self.expected]
        if self.got is not None:
            lines += [f"  after:  {_array(v)}" for v in self.got]
        lines.append(f"  {self.problem}")
        lines += [f"  {self.note}"] if self.note else []
        return "\n".join(lines)


_LABELS = {
    "wrong": "WRONG",
    "ill-formed": "ILL-FORMED",
    "loops": "LOOPS",
    "unverified": "UNVERIFIED",
    "verified": "verified",
    "proved": "proved",
    "proved-reals": "proved/reals",
    "proved-bounded": "proved/bound",
}


@dataclass
class Verdict:
    """The outcome for one rule; `status` is one of STATUSES, `ok` unless wrong or ill-formed."""

    rule: Rule
    status: str
    examples: int = 0
    attempts: int = 0
    reason: str = ""
    counterexample: Counterexample | None = None
    seconds: float = 0.0
    out_of_time: bool = False
    semantics: str = "strict"
    floats: str = "ieee"  # or "reals": values judged as real numbers (`compare`)
    bound: int | None = None  # proved-bounded: for lengths <= bound (None: for all)
    rank: int | None = None  # proved-bounded: for ranks <= rank
    note: str = ""  # e.g. why a rule tested was not proved
    layouts: str = ""  # how many other layouts were judged for ill-formedness, of what bound
    dtypes: str = ""  # the narrow dtypes the rule's instances also ran in (`dtypes`)
    cached: bool = False  # read from the verdict cache (`verification.cache`)

    @property
    def ok(self) -> bool:
        return self.status not in FAILING

    @property
    def failed(self) -> bool:
        return not self.ok

    def _detail(self) -> str:
        refine = " (refinement)" if self.semantics == "refine" else ""
        refine += " (over the reals)" if self.floats == "reals" else ""
        assumed = self.rule.assumptions
        assuming = f", assuming {describe(assumed)}" if assumed else ""
        if self.status == "verified":
            budget = " (stopped by the time safety net)" if self.out_of_time else ""
            note = "".join(f"; {n}" for n in (self.dtypes, self.layouts, self.note) if n)
            return f"{self.examples} examples fired{refine}{budget}{assuming}{note}"
        if self.status in PROVED:
            over = " over the reals" if self.status == "proved-reals" else ""
            return f"proved{over}{refine} {self.reason}".rstrip() + assuming
        if self.status == "proved-bounded":
            scope = f"for ranks <= {self.rank} and lengths <= {self.bound}"
            tested = f"; {self.note}" if self.note else ""
            return f"proved {scope}{refine} {self.reason}{assuming}{tested}"
        if self.status in FAILING and self.counterexample is not None:
            shown = self.note.startswith(("true over the reals", "z3 proved for ranks"))
            reals = f"; {self.note}" if shown else ""
            return self.counterexample.problem + assuming + reals
        return self.reason + assuming

    @property
    def headline(self) -> str:
        where = f"{self.rule.name} ({self.rule.location})"
        return f"{_LABELS[self.status]:13s} {where}: {self._detail()}"

    def __str__(self) -> str:
        if self.counterexample is None:
            return self.headline
        return f"{self.headline}\n{indent(str(self.counterexample), '  ')}"


@dataclass
class VerificationReport:
    """Per-rule verdicts; `ok` when no rule is wrong or ill-formed."""

    verdicts: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0
    interrupted: bool = False
    kernels: list = field(default_factory=list)  # KernelVerdicts of declared ops' fast kernels
    seed: int | None = None  # the seed of every draw (None: a derandomized profile's own)

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts) and all(k.ok for k in self.kernels)

    @property
    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]

    def __getitem__(self, name: str) -> Verdict:
        for v in self.verdicts:
            if v.rule.name == name:
                return v
        raise KeyError(name)

    def __iter__(self):
        return iter(self.verdicts)

    def __len__(self) -> int:
        return len(self.verdicts)

    def summary(self) -> str:
        counts = Counter(v.status for v in self.verdicts)
        parts = [f"{counts[s]} {s}" for s in STATUSES if counts[s]] or ["nothing"]
        stopped = " (interrupted)" if self.interrupted else ""
        seed = self.seed
        seeded = f" (seed {seed}: --seed {seed} repeats it)" if seed is not None else ""
        hits = sum(v.cached for v in self.verdicts)
        cached = f", {hits} from the cache" if hits else ""
        rules = f"{len(self.verdicts)} rules in {self.seconds:.1f} s{cached}"
        return f"{', '.join(parts)} of {rules}{stopped}{seeded}"

    def __str__(self) -> str:
        lines = [*(str(v) for v in self.verdicts), *map(str, self.kernels)]
        return "\n".join([*lines, self.summary()])


def over_the_reals(proof: Verdict, tested: Verdict) -> Verdict:
    """A rule proved over the real numbers is still tested in IEEE floats: wrong there, its
    verdict is `wrong`, saying that it is true over the reals (the proof); else the proof."""
    if not tested.failed:
        proof.seconds += tested.seconds
        return proof
    tested.note = f"true over the reals ({proof.headline.split(': ', 1)[-1]})"
    tested.seconds += proof.seconds
    return tested


def with_proof(proof: Verdict, tested: Callable[[], Verdict], floats: str) -> Verdict:
    """The verdict of a rule the prover tried, `tested()` its testing: a proof over the reals
    is still tested in floats (`over_the_reals`); a bounded proof never replaces testing,
    which goes beyond the bound: a failure there is the verdict, and a bounded proof stands
    only when testing verified the rule too; a rule neither proved nor refuted is tested, the
    prover's reason noted."""
    if proof.status == "proved-reals" and floats == "ieee":
        return over_the_reals(proof, tested())
    if proof.bound is not None and proof.status in ("proved-bounded", "loops"):
        return _beyond(proof, tested())
    if proof.status in PROVED or proof.status == "loops" or proof.failed:
        return proof
    verdict = tested()
    verdict.note, verdict.seconds = proof.reason, verdict.seconds + proof.seconds
    return verdict


def _beyond(proof: Verdict, beyond: Verdict) -> Verdict:
    """A bounded proof and the rule's testing (random shapes up to rank 5, lengths 5)."""
    beyond.seconds += proof.seconds
    if beyond.status not in ("verified", "loops"):  # wrong beyond the bound, or not tested
        claim = proof.headline.split(": ", 1)[1]
        beyond.note = f"z3 {claim}; testing {'failed' if beyond.failed else 'did not confirm it'}"
        return beyond
    proof.seconds = beyond.seconds
    proof.note = f"and tested: {beyond.examples} examples fired"
    return proof
