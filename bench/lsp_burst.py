"""The language server under a burst of edits: a hover sent right after N incremental edits of a
large document, against one full analysis of that document (what a server that re-checks every
edit pays N times before it reads the hover).

    python bench/lsp_burst.py [--rules 1280] [--edits 200]

The server runs in this process on a pipe, as `ngrules lsp` runs on stdin.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import threading
import time

from ngrules.lsp.analysis import Document
from ngrules.lsp.server import build_server
from ngrules.lsp.session import Session, quiet_logging

URI = "file:///bench/big.rules"


def _frame(message: dict) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def document(rules: int) -> str:
    return "pass p\n" + "".join(
        f"rule r{i}: Log(Exp(x)) * {i} + 0 => x * {i}\n" for i in range(rules))


class _Replies(io.BytesIO):
    """The server's output; notes when the reply to `wanted` is written."""

    def __init__(self):
        super().__init__()
        self.wanted, self.done = None, threading.Event()

    def write(self, data: bytes) -> int:
        if self.wanted is not None and b'"id": "%s"' % self.wanted.encode() in data:
            self.done.set()
        return super().write(data)


def hover_after(edits: int, text: str, settle: float = 3.0) -> float:
    """Seconds from the moment `edits` edits and a hover are written to the hover's reply."""
    quiet_logging()
    read, write = os.pipe()
    replies = _Replies()
    session = Session(build_server(), open(read, "rb", buffering=0), replies)  # noqa: SIM115
    thread = threading.Thread(target=session.run)
    thread.start()
    start = [{"id": 0, "method": "initialize",
              "params": {"processId": None, "rootUri": None, "capabilities": {}}},
             {"method": "initialized", "params": {}},
             {"method": "textDocument/didOpen", "params": {"textDocument": {
                 "uri": URI, "languageId": "ngrules", "version": 1, "text": text}}}]
    os.write(write, b"".join(map(_frame, start)))
    time.sleep(settle)  # the opened document analysed
    burst = [{"method": "textDocument/didChange", "params": {
        "textDocument": {"uri": URI, "version": v}, "contentChanges": [{"range": {
            "start": {"line": v + 1, "character": 0}, "end": {"line": v + 1, "character": 0}},
            "text": " "}]}} for v in range(2, 2 + edits)]
    lines = text.count("\n")
    hover = {"id": "h", "method": "textDocument/hover", "params": {
        "textDocument": {"uri": URI}, "position": {"line": lines // 2, "character": 12}}}
    replies.wanted = "h"
    data = b"".join(map(_frame, [*burst, hover]))
    began = time.perf_counter()
    os.write(write, data)
    replies.done.wait(120)
    took = time.perf_counter() - began
    os.close(write)
    thread.join()
    return took


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rules", type=int, default=1280)
    p.add_argument("--edits", type=int, default=200)
    args = p.parse_args(argv)
    text = document(args.rules)
    began = time.perf_counter()
    Document(text, "/bench/big.rules")
    analysis = time.perf_counter() - began
    burst = hover_after(args.edits, text)
    idle = hover_after(0, text)
    row = {"bytes": len(text.encode()), "edits": args.edits, "idle": idle, "burst": burst,
           "analysis": analysis}
    print(f"document: {row['bytes']} bytes; one full analysis: {analysis:.3f} s")
    print(f"hover on an idle server:        {idle:.3f} s")
    print(f"hover after {args.edits} edits:           {burst:.3f} s "
          f"({burst / analysis:.2f} x one analysis; re-checking every edit first would be "
          f"{args.edits} x)")
    return row


if __name__ == "__main__":
    main()
