"""The budget of a whole ONNX import or export (`ngrules.budget`), and a timer for its steps.

A step that runs Python for a long time inside one call (onnx's reference evaluator, looping
over a pooling window) runs under a timer that stops it (`Meter.within`); the rest of the
accounting (bytes charged, time checked between steps) is the shared `ngrules.budget.Meter`'s.
"""

from __future__ import annotations

import gc
import signal
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ngrules import budget as _shared
from ngrules.budget import DEFAULT_BUDGET, Budget
from ngrules.interop.onnx import OnnxError

__all__ = ["DEFAULT_BUDGET", "Budget", "BudgetExceeded", "Meter"]

T = TypeVar("T")


class BudgetExceeded(_shared.BudgetExceeded, OnnxError):
    """An import or export that would pass its memory or time budget (one line naming it)."""


class _Expired(BaseException):
    """The timer's signal, raised inside a step: a BaseException, so that no `except
    Exception` inside the library the step runs swallows it."""


class Meter(_shared.Meter):
    """One import's or export's spending against its budget (see `ngrules.budget.Meter`),
    and a timer for its long steps."""

    error = BudgetExceeded

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
