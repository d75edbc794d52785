"""The onnxruntime check of a written model off the command's critical path: a child process
(`ort_session`, run as a script) started when `ngrules apply` starts imports onnxruntime while
this process reads, imports and rewrites the model, then builds the session on the written
model it is sent (and on the model read, where `as_read.refusal` asks).

`started()` starts the child for the commands that write an ONNX model; `ask(data)` is the
answer for a serialized model: the child's while one runs in this context, else
`ort_session.refusal` in this process (the library's `to_onnx`). The child never outlives
`started()`: ended on leaving it, whatever the way out (an error, Ctrl-C, SIGTERM). A child
that dies (killed, onnxruntime crashing) or does not answer within `TIMEOUT` is an
`OnnxError`, never a hang.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from ngrules.interop.onnx import OnnxError

#: Seconds the child may take to answer (importing onnxruntime, then the session): the
#: export's default time budget.
TIMEOUT = 120.0

#: The child's command: this Python running `ort_session.py` by path.
COMMAND = [sys.executable, str(Path(__file__).with_name("ort_session.py"))]

_CHILD: contextvars.ContextVar[Child | None] = contextvars.ContextVar("ort_child", default=None)


class Child:
    """The child process and the thread that reads its answers (a line each; None: its end)."""

    def __init__(self, command: list[str]):
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, name="ngrules-ort-child", daemon=True).start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # closed under the thread: the end
            for line in self.process.stdout:
                self.answers.put(line)
        self.answers.put(None)

    def ask(self, data: bytes, timeout: float) -> tuple[str, str | None] | None:
        """The child's `ort_session.refusal(data)`."""
        try:
            self.process.stdin.write(len(data).to_bytes(8, "big") + data)
            self.process.stdin.flush()
        except OSError:  # it died before reading: its end says how
            pass
        try:
            line = self.answers.get(timeout=timeout)
        except queue.Empty:
            self.end()
            raise OnnxError(f"the onnxruntime check of the written model did not answer within "
                            f"{timeout:g} s (its process was ended)") from None
        if line is None:
            raise OnnxError(f"the onnxruntime check of the written model failed: its process "
                            f"{self._how_ended()}")
        answer = json.loads(line)
        return None if answer.get("absent") else (answer["version"], answer["error"])

    def _how_ended(self) -> str:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.end()
            return "closed its output"
        return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"

    def end(self) -> None:
        """Kill the child (done or not) and reap it."""
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        self.process.kill()
        self.process.wait()


@contextlib.contextmanager
def started(wanted: bool = True) -> Iterator[None]:
    """A child to check written models in, for the context, where `wanted` and onnxruntime is
    installed (its spec found: nothing is imported here)."""
    if not wanted or _CHILD.get() is not None or not _installed():
        yield
        return
    child = Child(COMMAND)
    token = _CHILD.set(child)
    try:
        yield
    finally:
        _CHILD.reset(token)
        child.end()


def _installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("onnxruntime") is not None
    except (ImportError, ValueError):
        return False


def ask(data: bytes) -> tuple[str, str | None] | None:
    """(onnxruntime's version, its message refusing the serialized model, or None); None
    where onnxruntime is not installed. From the child where one was started."""
    child = _CHILD.get()
    if child is not None:
        return child.ask(data, TIMEOUT)
    from ngrules.interop.onnx.exporting.ort_session import refusal

    return refusal(data)
