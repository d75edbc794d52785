"""The language server's analyses share one budget of child processes (issue 37, F12): 16 open
documents of 1 MB once forked 16 children at once. At most MAX_CHILDREN run; the others wait,
each with its latest text, and every document still gets its diagnostics."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import threading
import time

from ngrules.lsp.background import MAX_CHILDREN, Background

RULES = "pass p\nrule r: Log(Exp(x)) => x\n"
WRONG = "pass p\nrule r: Lgo(x) => x\n"


def _run(starts, limit: int = MAX_CHILDREN, timeout: float = 60.0):
    """Start the analyses (key, text) in order; (diagnostics per key, most children at once)."""

    async def run():
        background, reported, most = Background(limit), {}, [0]

        def done_for(key):
            def done(found):
                reported[key] = found
                most[0] = max(most[0], len(background.running))
            return done

        for key, text in starts:
            background.start(key, text, f"/t/{key}.rules", done_for(key))
            most[0] = max(most[0], len(background.running))
        for _ in range(int(timeout / 0.05)):
            if len(reported) == len({k for k, _ in starts}):
                break
            await asyncio.sleep(0.05)
        background.close()
        return reported, most[0], len(background.waiting)

    return asyncio.run(run())


def test_sixteen_documents_never_run_more_than_the_limit_of_children():
    starts = [(f"d{i}", RULES if i % 2 else WRONG) for i in range(16)]
    reported, most, waiting = _run(starts)
    assert most <= MAX_CHILDREN == 2
    assert sorted(reported) == sorted(k for k, _ in starts) and waiting == 0
    assert all(reported[f"d{i}"] == [] for i in range(1, 16, 2))
    assert all("unknown op" in reported[f"d{i}"][0].message for i in range(0, 16, 2))


def test_a_waiting_document_is_analysed_with_its_latest_text_once():
    starts = [("a", RULES), ("b", RULES), ("c", WRONG), ("c", RULES)]
    reported, most, _ = _run(starts, limit=1)
    assert most == 1 and reported == {"a": [], "b": [], "c": []}


# -- F20: no traceback on the editor's log when the server ends mid-burst -----------------------
BIG = "pass p\n" + "".join(f"rule r{i}: Log(Exp(x)) * {i} + 0 => x * {i}\n" for i in range(1280))


def _frame(message: dict) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_messages_after_exit_end_the_reader_quietly():
    """`exit` while more messages are on their way: the reader thread once met the closed loop
    (RuntimeError or CancelledError, a traceback on stderr)."""
    from ngrules.lsp.server import build_server
    from ngrules.lsp.session import Session

    change = {"method": "textDocument/didChange", "params": {
        "textDocument": {"uri": "file:///t/a.rules", "version": 2},
        "contentChanges": [{"text": RULES}]}}
    first = b"".join(_frame(m) for m in [
        {"id": 0, "method": "initialize", "params": {"processId": None, "capabilities": {}}},
        {"method": "initialized", "params": {}}, {"method": "exit"}])
    failures, previous = [], threading.excepthook
    threading.excepthook = failures.append
    read, write = os.pipe()
    try:
        with open(read, "rb", buffering=0) as reader:
            os.write(write, first)
            assert Session(build_server(), reader, io.BytesIO()).run() == 1  # no shutdown
            os.write(write, _frame(change) * 20)  # read after the loop has ended
            time.sleep(0.5)
    finally:
        os.close(write)
        threading.excepthook = previous
    assert failures == []


def test_a_child_stopped_by_sigterm_ends_without_a_traceback(capfd):
    """The command line takes SIGTERM as Ctrl-C; the children inherited that and printed a
    KeyboardInterrupt traceback when the server's exit stopped them."""
    from ngrules.interrupts import terminating_as_interrupts

    async def run():
        background = Background()
        background.start("u", BIG * 4, "/t/big.rules", lambda found: None)
        child = background.running["u"][0]
        await asyncio.sleep(0.5)  # inside the analysis
        os.kill(child.pid, signal.SIGTERM)
        child.join(10)
        background.close()
        return child.exitcode

    with terminating_as_interrupts():
        assert asyncio.run(run()) == -signal.SIGTERM
    assert "Traceback" not in capfd.readouterr().err
