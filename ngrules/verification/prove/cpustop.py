"""A stop for a z3 query measured in the CPU time of the process, not in wall-clock time.

z3's resource limit counts deterministic steps, but its nonlinear real arithmetic spends
seconds to minutes inside steps it barely counts (a claim of the library ran 10 minutes within
a million steps; others stall at a count that no longer moves, whatever the limit). A wall-clock
`timeout` stopped those, so a loaded machine, where a query waits for a core, could turn a
proof into "z3 could not decide". CPU time is what the query itself spent: on a loaded machine
it stays what it is on a quiet one, so the claims that meet this stop are those z3 cannot
decide in any case. A watcher thread interrupts the query once the process has spent the
allowed CPU seconds on it (z3 releases the interpreter while it works).
"""

from __future__ import annotations

import threading
import time

import z3

#: How often the watcher reads the process's CPU time, in seconds.
POLL = 0.02


class CpuStop:
    """`with CpuStop(seconds): solver.check()`: z3 is interrupted once the process has spent
    `seconds` of CPU time inside the block; `hit` says whether it was."""

    def __init__(self, seconds: float, context: z3.Context | None = None):
        self.seconds, self.hit = seconds, False
        self._context = context or z3.main_ctx()
        self._done = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        end = time.process_time() + self.seconds
        while not self._done.wait(POLL):
            if time.process_time() > end:
                self.hit = True
                self._context.interrupt()
                return

    def __enter__(self) -> CpuStop:
        self._watcher.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._watcher.join()
