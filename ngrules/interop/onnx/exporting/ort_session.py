"""An onnxruntime session built on a serialized model, to learn whether onnxruntime refuses it:
in the exporter's process (`refusal`), or in a child process that `ort_child` starts early.

Run as a script (`python .../ort_session.py`, by path: not `-m`, which would import the
ngrules package first), this module is that child: it imports onnxruntime at once, while its
parent reads and rewrites the model, then answers each model its parent sends. It imports
nothing of ngrules, so that the child's start costs only Python, numpy and onnxruntime.

The protocol, over the child's stdin and stdout: a request is the model's byte count as 8
bytes (big-endian) and the model; each answer is one line of JSON, {"version": onnxruntime's
version, "error": its message or null}, or {"absent": true} where onnxruntime cannot be
imported. End of input ends the child.
"""

from __future__ import annotations

import contextlib
import json
import sys


def refusal(data: bytes) -> tuple[str, str | None] | None:
    """(onnxruntime's version, its message refusing the serialized model or None when it
    builds a session on it); None where onnxruntime is not installed. No optimisation runs,
    on one thread."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    try:
        ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001  onnxruntime's errors, of its own types
        return ort.__version__, str(e)
    return ort.__version__, None


def _serve(requests, answers) -> None:
    """Answer each model read from `requests` on `answers` until the input ends."""
    while True:
        header = requests.read(8)
        if len(header) < 8:
            return
        size = int.from_bytes(header, "big")
        data = requests.read(size)
        if len(data) < size:
            return
        found = refusal(data)
        answer = {"absent": True} if found is None else {"version": found[0], "error": found[1]}
        answers.write(json.dumps(answer).encode() + b"\n")
        answers.flush()


def _main() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's: it ends the child
    with contextlib.suppress(ImportError):
        import onnxruntime  # noqa: F401  now, while the parent works
    _serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    del sys.path[0]  # this module's folder: its modules must not shadow what onnxruntime imports
    _main()
