"""Ctrl-Cs that Python swallows, kept so that long work still stops; SIGTERM taken as a Ctrl-C;
forked children that leave both to their parent.

A KeyboardInterrupt raised inside a destructor or a garbage-collector callback (`ZipFile.__del__`
while a graph loads; hypothesis's gc callback while rules are verified) is "unraisable": Python
reports it and goes on. While `noticing_lost_interrupts()` is active such an interrupt is kept,
and `raise_if_interrupted()`, called between units of long work and before outputs are moved
into place, raises it again where it can be caught.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

_LOST: list[BaseException] = []


def raise_if_interrupted() -> None:
    """Raise the KeyboardInterrupt that a destructor or callback swallowed, if any, once: raised,
    it is no longer lost (a command that handles it reports it once, not twice)."""
    if _LOST:
        _LOST.clear()
        raise KeyboardInterrupt


@contextlib.contextmanager
def noticing_lost_interrupts() -> Iterator[None]:
    """Keep the KeyboardInterrupts Python would only report, for `raise_if_interrupted`."""
    previous = sys.unraisablehook

    def keep(unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            _LOST.append(unraisable.exc_value)
        else:
            previous(unraisable)

    sys.unraisablehook = keep
    try:
        yield
    finally:
        sys.unraisablehook = previous
        _LOST.clear()


@contextlib.contextmanager
def terminating_as_interrupts() -> Iterator[None]:
    """SIGTERM (`kill`, a CI job cancelled) raises KeyboardInterrupt as Ctrl-C does, so it
    stops work the same way: temporary files removed, results computed so far printed and
    flushed. Only the main thread can set a handler; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: What a forked child does with the signals its parent handles: SIGTERM (the parent ending it)
#: kills it at once, Ctrl-C (sent to every process of the terminal's group) is the parent's.
CHILD_SIGNALS = {signal.SIGINT: signal.SIG_IGN, signal.SIGTERM: signal.SIG_DFL}


def leave_interrupts_to_parent() -> None:
    """A forked child's first step: without it the child runs the parent's handlers
    (`terminating_as_interrupts`), and a child ended by its parent prints a
    KeyboardInterrupt traceback. Unblocks what `held_while_forking` blocked."""
    for signum, handling in CHILD_SIGNALS.items():
        signal.signal(signum, handling)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, CHILD_SIGNALS)


@contextlib.contextmanager
def held_while_forking() -> Iterator[None]:
    """SIGINT and SIGTERM blocked while children fork (and threads start, which keep the
    mask): one arriving then waits for the parent's unblocking or the child's
    `leave_interrupts_to_parent`, never runs the parent's handler in a child."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, CHILD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
