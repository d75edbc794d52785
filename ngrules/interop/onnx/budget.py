"""The budget of a whole ONNX import or export (`ngrules.budget`), and a timer for its steps.

A step that runs Python for a long time inside one call (onnx's reference evaluator, looping
over a pooling window) runs under a timer that stops it (`Meter.timed`); the rest of the
accounting (bytes charged, time checked between steps) is the shared `ngrules.budget.Meter`'s.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator

from ngrules import budget as _shared
from ngrules.budget import DEFAULT_BUDGET, Budget
from ngrules.interop.onnx import OnnxError

__all__ = ["DEFAULT_BUDGET", "Budget", "BudgetExceeded", "Meter"]


class BudgetExceeded(_shared.BudgetExceeded, OnnxError):
    """An import or export that would pass its memory or time budget (one line naming it)."""


class _Expired(BaseException):
    """The timer's signal, raised inside a step: a BaseException, so that no `except
    Exception` inside the library the step runs swallows it."""


class Meter(_shared.Meter):
    """One import's or export's spending against its budget (see `ngrules.budget.Meter`),
    and a timer for its long steps."""

    error = BudgetExceeded

    @contextlib.contextmanager
    def timed(self, what: str) -> Iterator[None]:
        """Run a step that may loop in Python for long under a timer (SIGALRM, in the main
        thread) that stops it when the job's time is spent; elsewhere time is checked after
        the step. A timer set before is restored."""
        self.check_time(what)
        if (threading.current_thread() is not threading.main_thread()
                or not hasattr(signal, "setitimer")):
            yield
            self.check_time(what)
            return
        armed = [True]

        def expire(signum, frame) -> None:
            if armed[0] and time.monotonic() >= self.deadline:
                raise _Expired
            if armed[0]:  # a budget longer than one timer holds: set it again
                signal.setitimer(signal.ITIMER_REAL, self._left())

        previous = signal.signal(signal.SIGALRM, expire)
        before = signal.setitimer(signal.ITIMER_REAL, self._left())
        start = time.monotonic()
        try:
            yield
        except _Expired:
            raise self._out_of_time(what) from None
        finally:
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if before[0] > 0:  # someone else's timer: what was left of it
                signal.setitimer(signal.ITIMER_REAL,
                                 max(before[0] - (time.monotonic() - start), 1e-3), before[1])
