"""One memory and time budget for a whole import or export, not for each of its steps.

A limit per step (per node, per tensor) lets many steps add up: ten constants under the limit
for one, or one external file read again for each tensor that names it. So each job gets a
`Meter`: every byte the job takes from its input (the model file, its external data, each value
folded) is charged to it, and the job is refused once the total would pass its budget, before
the bytes are taken. Time is checked between steps, and a step that runs Python for a long time
(onnx's reference evaluator, looping over a pooling window) runs under a timer that stops it.
Each refusal is one line naming the budget and the option that raises it.
"""

from __future__ import annotations

import gc
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ngrules.interop.onnx import OnnxError
from ngrules.interrupts import raise_if_interrupted

T = TypeVar("T")


@dataclass(frozen=True)
class Budget:
    """What one import or one export may take in all: bytes held and seconds spent."""

    memory_bytes: int = 1 << 31  # 2 GiB: the largest model file protobuf reads
    seconds: float = 120.0


DEFAULT_BUDGET = Budget()


class BudgetExceeded(OnnxError):
    """A job that would pass its memory or time budget (one line naming the budget)."""


class _Expired(BaseException):
    """The timer's signal, raised inside a step: a BaseException, so that no `except
    Exception` inside the library the step runs swallows it."""


class Meter:
    """One job's spending against its budget. `job` names it ("import", "export") and the
    options that raise it (`--import-memory`, `--import-seconds`)."""

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
            raise BudgetExceeded(
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
        return BudgetExceeded(
            f"{what}: past the {self.job}'s time budget of {self.budget.seconds:g} s (raise it "
            f"with --{self.job}-seconds or Budget(seconds=...))")

    def within(self, what: str, step: Callable[[], T]) -> T:
        """`step()` under a timer (SIGALRM, in the main thread) that stops it once the job's
        time is spent; elsewhere time is checked after the step. A timer set before is
        restored.

        The timer's signal raises inside whatever Python code runs when it arrives, and some
        code loses what it raises: a garbage-collector callback (hypothesis installs one: in a
        long-lived process that had run hypothesis, 4 budget stops in 6 were lost and a
        fold ran for minutes), a destructor, a library's `except BaseException`. So the
        handler does not raise inside a gc callback, and once the time is spent the timer
        fires again every `RETRY` seconds until the step ends."""
        self.check_time(what)
        if (threading.current_thread() is not threading.main_thread()
                or not hasattr(signal, "setitimer")):
            result = step()
            self.check_time(what)
            return result
        armed = [True]

        def expire(signum, frame) -> None:
            if not armed[0] or _in_gc_callback(frame):  # raised there, it would be lost
                return
            if time.monotonic() >= self.deadline:
                raise _Expired  # the interval timer fires again if this is lost
            signal.setitimer(signal.ITIMER_REAL, self._left(), RETRY)  # past a day's timer

        previous = signal.signal(signal.SIGALRM, expire)
        before = signal.setitimer(signal.ITIMER_REAL, self._left(), RETRY)
        start = time.monotonic()
        try:
            try:
                return step()
            finally:
                armed[0] = False  # first, with no call before it: no handler runs in between
                _restore(previous, before, start)
        except _Expired:  # raised in the step, or just before `armed` was cleared
            armed[0] = False
            _restore(previous, before, start)
            raise self._out_of_time(what) from None


#: Seconds between the timer's signals once a job's time is spent (until the step ends).
RETRY = 0.05


def _in_gc_callback(frame, depth: int = 8) -> bool:
    """Whether the signal interrupted a garbage-collector callback (or what it calls), where
    Python would report and drop an exception: the timer's next signal raises instead."""
    codes = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    while frame is not None and depth > 0:
        if frame.f_code in codes:
            return True
        frame, depth = frame.f_back, depth - 1
    return False


def _restore(previous, before: tuple[float, float], start: float) -> None:
    """The SIGALRM handler and the timer as they were before `Meter.within` (idempotent)."""
    signal.setitimer(signal.ITIMER_REAL, 0)
    # None: a handler set outside Python, which Python cannot set again
    signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)
    if before[0] > 0:  # someone else's timer: what was left of it
        signal.setitimer(signal.ITIMER_REAL,
                         max(before[0] - (time.monotonic() - start), 1e-3), before[1])
