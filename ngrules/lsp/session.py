"""The server's main loop: framed messages in, pygls's dispatch, the lifecycle of the spec.

pygls dispatches well-formed messages to the features; this loop guards everything around
it. Framing errors are skipped (`framing`); a body that is not JSON gets a ParseError, one
that is not a JSON-RPC message an InvalidRequest, a request whose params do not fit its
method an InvalidParams, so every request with an id is answered. Before `initialize`,
requests get ServerNotInitialized; after `shutdown`, InvalidRequest; `exit` ends the loop
with 0 after a `shutdown` and 1 without one (so does the end of the input).

Messages are read on a thread and handled on an asyncio loop, so features can set timers
(the debounced diagnostics of `server`). Problems are logged as one line on stderr.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import sys
import threading
from typing import Any, BinaryIO

from ngrules.lsp.framing import BadFrame, Framer

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR, SERVER_NOT_INITIALIZED = -32603, -32002
#: Messages read ahead of the one being handled (the reader waits when this many are queued):
#: with `framing.MAX_BODY`, at most 256 MiB held.
READ_AHEAD = 16

log = logging.getLogger("ngrules.lsp")


class _OneLine(logging.Handler):
    """`ngrules lsp: <message>` on stderr: no tracebacks between an editor's log lines."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage().splitlines()
        print(f"ngrules lsp: {message[0] if message else record.levelname}", file=sys.stderr)


def quiet_logging() -> None:
    """pygls logs failures with tracebacks; keep its warnings, one line each."""
    for name in ("pygls", "ngrules.lsp", "asyncio"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [_OneLine(logging.WARNING)]
        logger.propagate = False


def _hand_over(loop, put) -> bool:
    """Run `put` on the loop and wait for it; False when the loop has ended meanwhile (the
    editor sent `exit` while more messages were on their way: once a RuntimeError traceback
    from this thread, issue 37 F20)."""
    try:
        asyncio.run_coroutine_threadsafe(put, loop).result()
    except (RuntimeError, concurrent.futures.CancelledError):
        put.close()  # never awaited: closed, so no warning either
        return False
    return True


def _is_id(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


class Session:
    """One connection: reads from `reader`, writes through the server's protocol."""

    def __init__(self, server, reader: BinaryIO, writer: BinaryIO):
        from pygls.io_ import StdoutWriter

        self.protocol = server.protocol
        self.protocol.set_writer(StdoutWriter(writer))
        self.writer = writer
        self.framer = Framer(reader)
        self.initialized = False
        self.exit_code: int | None = None

    def run(self) -> int:
        """Serve until `exit` or the end of the input; the process's exit code."""
        return asyncio.run(self._serve())

    async def _serve(self) -> int:
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue = asyncio.Queue(READ_AHEAD)

        def read() -> None:
            while True:
                item = self.framer.next()
                if not _hand_over(loop, inbox.put(item)) or item is None:
                    return

        threading.Thread(target=read, name="ngrules-lsp-reader", daemon=True).start()
        while self.exit_code is None:
            item = await inbox.get()
            if item is None:
                return 0 if self.protocol._shutdown else 1
            if isinstance(item, BadFrame):
                log.warning("bad message framing: %s", item.reason)
                continue
            self.handle(item)
            await asyncio.sleep(0)  # let due timers run between messages
        return self.exit_code

    # -- one message ------------------------------------------------------------------------
    def handle(self, body: bytes) -> None:
        try:
            raw = json.loads(body)
        except (ValueError, RecursionError):
            return self.error(None, PARSE_ERROR, "the message is not JSON")
        if not isinstance(raw, dict) or raw.get("jsonrpc") != "2.0":
            ident = raw.get("id") if isinstance(raw, dict) else None
            return self.error(ident if _is_id(ident) else None, INVALID_REQUEST,
                              'not a JSON-RPC 2.0 message (an object with "jsonrpc": "2.0")')
        method, has_id, ident = raw.get("method"), "id" in raw, raw.get("id")
        if has_id and not _is_id(ident):
            return self.error(None, INVALID_REQUEST, "an id must be a number or a string")
        if method is None and not (has_id and ("result" in raw or "error" in raw)):
            return self.error(ident if has_id else None, INVALID_REQUEST,
                              "neither a request, a notification nor a response")
        if method is not None and not isinstance(method, str):
            return self.error(ident if has_id else None, INVALID_REQUEST,
                              "the method must be a string")
        refusal = self._refusal(method)
        if refusal is not None:
            if has_id and method is not None:
                self.error(ident, *refusal)
            return None
        self._dispatch(raw, method, ident if has_id else None)
        return None

    def _refusal(self, method: str | None) -> tuple[int, str] | None:
        """Why the lifecycle refuses this message now (exit is handled here), or None."""
        if method == "exit":
            self.exit_code = 0 if self.protocol._shutdown else 1
            return (INVALID_REQUEST, "exit is a notification")
        if self.protocol._shutdown:
            return (INVALID_REQUEST, "the server has been shut down; only exit is accepted")
        if method == "initialize":
            if self.initialized:
                return (INVALID_REQUEST, "the server is already initialized")
            return None
        if not self.initialized and method is not None:
            return (SERVER_NOT_INITIALIZED, "the server is not initialized yet")
        return None

    def _dispatch(self, raw: dict, method: str | None, ident) -> None:
        try:
            message = self.protocol.structure_message(raw)
        except Exception:  # cattrs could not build the method's params: they do not fit it
            if ident is not None and method is not None:
                known = method in self.protocol.fm.features or method in (
                    self.protocol.fm.builtin_features)
                self.error(ident, *((INVALID_PARAMS, f"the params do not fit {method}") if known
                                    else (METHOD_NOT_FOUND, f"no method {method}")))
            return
        if method == "initialize":
            self.initialized = True
        try:
            self.protocol.handle_message(message)
        except Exception as e:  # pygls answers a failing feature itself; this is a last guard
            log.warning("%s failed: %s: %s", method or "a response", type(e).__name__, e)
            if ident is not None and method is not None:
                self.error(ident, INTERNAL_ERROR, f"{method} failed: {type(e).__name__}")

    def error(self, ident, code: int, message: str) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": ident,
                           "error": {"code": code, "message": message}}).encode()
        self.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.writer.flush()
