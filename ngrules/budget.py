"""One memory and time budget for a whole job (an import, an export, a rewrite), not for each
of its steps.

A limit per step (per node, per tensor, per rewrite) lets many steps add up. So each job gets a
`Meter`: every byte the job takes (a model's bytes, a value folded, the nodes a rule builds) is
charged to it, and the job is refused once the total would pass its budget, before the bytes
are taken. Time is checked between bounded chunks of work. Each refusal is one line naming the
budget and the option that raises it (`--JOB-memory`, `--JOB-seconds`). The ONNX importer and
exporter add a timer around onnx's evaluator (`interop.onnx.budget`).
"""

from __future__ import annotations

import time

from ngrules.errors import NgrulesError
from ngrules.interrupts import raise_if_interrupted
from ngrules.records import frozen


@frozen
class Budget:
    """What one job may take in all: bytes held and seconds spent."""

    memory_bytes: int = 1 << 31  # 2 GiB: the largest model file protobuf reads
    seconds: float = 120.0


DEFAULT_BUDGET = Budget()


class BudgetExceeded(NgrulesError):
    """A job that would pass its memory or time budget (one line naming the budget)."""


class Meter:
    """One job's spending against its budget. `job` names it ("import", "export", "rewrite")
    and the options that raise it (`--import-memory`, `--import-seconds`)."""

    #: The error a refusal raises (the ONNX jobs raise theirs, an `OnnxError` too).
    error: type[BudgetExceeded] = BudgetExceeded

    def __init__(self, budget: Budget = DEFAULT_BUDGET, job: str = "import"):
        self.budget, self.job = budget, job
        self.spent = 0
        self.deadline = time.monotonic() + budget.seconds

    def charge(self, nbytes: float, what: str) -> None:
        """Count `nbytes` the job is about to take for `what`, or refuse it if the total
        would pass the budget (nothing is taken then)."""
        total = self.spent + nbytes
        if total > self.budget.memory_bytes:
            size = f"{nbytes:.3g}" if nbytes >= 1e15 else f"{int(nbytes)}"
            raise self.error(
                f"{what} would take {size} bytes more, past the {self.job}'s memory budget of "
                f"{self.budget.memory_bytes} bytes ({self.spent} taken; raise it with "
                f"--{self.job}-memory or Budget(memory_bytes=...))")
        self.spent = int(total)

    def check(self, nbytes: float, what: str) -> None:
        """Refuse now, before making it, what would pass the budget (nothing is charged)."""
        self.charge(nbytes, what)
        self.release(nbytes)

    def release(self, nbytes: float) -> None:
        """Give back bytes charged for a value that is no longer held (an estimate replaced
        by the size of what was made)."""
        self.spent = max(0, int(self.spent - nbytes))

    def check_time(self, what: str) -> None:
        """Between two steps: stop if a Ctrl-C was swallowed, or if the time is spent."""
        raise_if_interrupted()
        if time.monotonic() > self.deadline:
            raise self._out_of_time(what)

    def _left(self) -> float:
        """Seconds to the deadline, within what one timer holds (a day; at least 1 ms)."""
        return min(max(self.deadline - time.monotonic(), 1e-3), 86400.0)

    def _out_of_time(self, what: str) -> BudgetExceeded:
        return self.error(
            f"{what}: past the {self.job}'s time budget of {self.budget.seconds:g} s (raise it "
            f"with --{self.job}-seconds or Budget(seconds=...))")
