"""A document's diagnostics computed in a child process, so the server never waits for them.

Checking a large document takes a second or more, and cannot be interrupted halfway (the
checker also declares the document's ops in the process-wide op table while it runs, so two
checks cannot share a process). The server forks a child per analysis, which inherits every
op registered so far; a newer version of the document kills the child of the older one (its
work is stale), so requests are answered while a check runs and no answer waits for one.
At most `MAX_CHILDREN` children run at once, whatever the number of open documents (16
documents of 1 MB once forked 16 children, and none finished within 90 s); the other
documents' analyses wait in order, the latest text of each. Where `fork` is unavailable the
analysis runs in the server itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import sys
from collections.abc import Callable

from ngrules.interrupts import leave_interrupts_to_parent
from ngrules.lsp.analysis import Diagnostic, Document

#: Analyses running at once, over every document (the others wait their turn).
MAX_CHILDREN = 2

#: What a finished analysis hands back: its diagnostics, or None when the child died.
Done = Callable[[list[Diagnostic] | None], None]


def diagnose(text: str, path: str) -> list[Diagnostic]:
    return Document(text, path).diagnostics()


def _child(send, text: str, path: str) -> None:
    # stdout is the editor's channel: whatever the child inherited buffered must never be
    # flushed twice (multiprocessing flushes sys.stdout when the child ends)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the child's short life
    # the server's own handlers (SIGTERM raised as KeyboardInterrupt by the command line) made
    # a child stopped by the server's exit print a traceback on the editor's log (issue 37,
    # F20): a child stopped ends silently, and Ctrl-C at a terminal is the server's to handle
    leave_interrupts_to_parent()
    try:
        result = diagnose(text, path)
    except BaseException:  # the parent logs a failed analysis; no traceback on the editor's log
        result = None
    with contextlib.suppress(OSError):  # the server is gone
        send.send(result)
        send.close()


class Background:
    """At most one running analysis per document (key), in a forked child, and at most
    `limit` children at once; the analyses beyond wait in `waiting`, oldest first."""

    def __init__(self, limit: int = MAX_CHILDREN):
        self.running: dict[str, tuple] = {}
        self.waiting: dict[str, tuple] = {}  # key -> (text, path, done), in order
        self.limit = limit
        methods = multiprocessing.get_all_start_methods()
        self.context = multiprocessing.get_context("fork") if "fork" in methods else None

    def start(self, key: str, text: str, path: str, done: Done) -> None:
        """Analyse in a child (killing the child of an older version), then call `done`;
        queued while `limit` children run."""
        self.cancel(key)
        if self.context is None:  # pragma: no cover - no fork (Windows): in this process
            done(diagnose(text, path))
            return
        if len(self.running) >= self.limit:
            self.waiting[key] = (text, path, done)
            return
        self._spawn(key, text, path, done)

    def _spawn(self, key: str, text: str, path: str, done: Done) -> None:
        receive, send = self.context.Pipe(duplex=False)
        child = self.context.Process(target=_child, args=(send, text, path), daemon=True)
        child.start()
        send.close()
        self.running[key] = (child, receive)
        loop = asyncio.get_running_loop()
        loop.add_reader(receive.fileno(), self._finished, key, done)

    def _finished(self, key: str, done: Done) -> None:
        child, receive = self._forget(key)
        try:
            result = receive.recv()
        except (EOFError, OSError):  # the child died (killed, out of memory)
            result = None
        receive.close()
        child.join(5)
        try:
            done(result)
        finally:
            self._next()

    def _next(self) -> None:
        """Start the waiting analyses that now fit, oldest first."""
        while self.waiting and len(self.running) < self.limit:
            key = next(iter(self.waiting))
            self._spawn(key, *self.waiting.pop(key))

    def _forget(self, key: str) -> tuple:
        child, receive = self.running.pop(key)
        with contextlib.suppress(RuntimeError):  # no loop: it ended (`close` at exit)
            asyncio.get_running_loop().remove_reader(receive.fileno())
        return child, receive

    def cancel(self, key: str) -> None:
        """Kill the analysis of `key`, if one runs or waits: a newer version replaced it."""
        self.waiting.pop(key, None)
        if key in self.running:
            child, receive = self._forget(key)
            child.kill()
            child.join(5)
            receive.close()
            self._next()

    def close(self) -> None:
        self.waiting.clear()
        for key in list(self.running):
            self.cancel(key)
