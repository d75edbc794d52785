"""Rules judged in parallel worker processes (`verify(..., jobs=N)`, `ngrules verify --jobs N`).

A rule's verdict does not depend on the others' (its instances are drawn for it alone,
derandomized; a run ends by counts; z3's limits count steps, with a stop in CPU seconds, not
wall-clock ones, for queries z3 gives up on), so N forked workers give the verdicts one
process gives; the report keeps the rules' order. Nodes are not picklable: a worker sends
a verdict back as its figures and its printed text, which the parent shows as they are
(`Sent`); a counterexample's graphs stay in the worker.

A worker takes neither the parent's SIGTERM handler (`interrupts.terminating_as_interrupts`,
which raises KeyboardInterrupt) nor Ctrl-C: the pool is ended with SIGTERM once the verdicts
are in, and a worker still alive then (a loaded machine) used to print a KeyboardInterrupt
traceback; a Ctrl-C, sent to every process of the terminal's group, stops the parent, which
ends the workers. Both signals are blocked while the workers fork, so none arrives before
a worker has set its own handling (`interrupts.leave_interrupts_to_parent`).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields

from ngrules.interrupts import held_while_forking, leave_interrupts_to_parent
from ngrules.lang.rules import Rule
from ngrules.verification.verdicts import Verdict

#: What a forked worker runs: the judge and its arguments, set before the workers fork.
_JOB: dict = {}


@dataclass
class Sent(Verdict):
    """A verdict computed in a worker: its figures, its headline and its text as printed
    there (its counterexample, if any, is in the text)."""

    head: str = ""
    text: str = ""

    @property
    def headline(self) -> str:
        return self.head

    def __str__(self) -> str:
        return self.text


_FIGURES = [f.name for f in fields(Verdict) if f.name not in ("rule", "counterexample")]


def _judge(index: int) -> tuple[int, dict]:
    rule = _JOB["rules"][index]
    verdict = _JOB["judge"](rule, *_JOB["args"])
    figures = {name: getattr(verdict, name) for name in _FIGURES}
    return index, {**figures, "head": verdict.headline, "text": str(verdict)}


def judged(rules: Sequence[Rule], judge: Callable[..., Verdict], args: tuple, jobs: int,
           on_rule: Callable[[int, int, Rule], None] | None = None) -> Iterator[Verdict]:
    """judge(rule, *args) for each rule, in the rules' order: here one by one (on_rule before
    each), or in `jobs` forked workers (on_rule as each verdict arrives, i counting them)."""
    if jobs <= 1 or len(rules) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for i, rule in enumerate(rules, start=1):
            if on_rule is not None:
                on_rule(i, len(rules), rule)
            yield judge(rule, *args)
        return
    _JOB.update(rules=list(rules), judge=judge, args=args)
    done: dict[int, Verdict] = {}
    following = 0
    with held_while_forking():
        pool = multiprocessing.get_context("fork").Pool(min(jobs, len(rules)),
                                                        initializer=leave_interrupts_to_parent)
    try:
        for index, sent in pool.imap_unordered(_judge, range(len(rules))):
            done[index] = Sent(rules[index], **sent)
            if on_rule is not None:
                on_rule(len(done), len(rules), rules[index])
            while following in done:  # in the rules' order, as soon as each can be
                yield done.pop(following)
                following += 1
    finally:
        pool.terminate()  # also on Ctrl-C: no worker outlives the run
        pool.join()
        _JOB.clear()


def while_interrupted(error: BaseException | None) -> bool:
    """Whether `error` was raised while a KeyboardInterrupt was being handled."""
    while error is not None:
        if isinstance(error, KeyboardInterrupt):
            return True
        error = error.__context__
    return False
