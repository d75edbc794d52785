"""Whether the written model's check is on the critical path of `ngrules apply -o out.onnx`
(issue 34, item 6): the check (onnx's checker, onnxruntime's import and a session built on the
weightless model) runs on the main thread while the writer thread writes the file
(`weights.write`; the staged file syncs it afterwards), so it costs wall time only where it
outlasts the writer.

Each round runs the command in a fresh process and prints, in milliseconds, the check, the
writer thread alone and the two together (the `weights.write` call); where "write" equals
"writer" the check was hidden. Round 9 tried the onnxruntime part in a child process started
at the command's start (commit e4b255f, reverted): on ResNet-50 the check then waited 24-52 ms
instead of 57-109, but the writer took 100-700 ms in every round, so the wall did not change
and the child cost 0.2 s of CPU. Rerun this if the write gets faster than the check.
Run: `python bench/check_overlap.py [--models resnet50] [--rounds 6]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, sys, time
from ngrules.interop.onnx import weights
from ngrules.interop.onnx.exporting.passes import refused
spent = {}
def timed(module, name, label):
    f = getattr(module, name)
    def g(*a, **k):
        start = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            spent[label] = (time.perf_counter() - start) * 1000
    setattr(module, name, g)
timed(weights, "write", "write"); timed(weights, "_write_parts", "writer")
timed(refused, "check", "check")
from ngrules.cli import main
main(sys.argv[2:])  # argv[1]: tool_stages' wrapped functions, not used here
print(json.dumps(spent), file=sys.stderr)
"""


def main(argv=None) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tool_speed import model_file
    from tool_stages import run_once

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ngrules-overlap-") as folder:
        for name in args.models.split(","):
            print(f"{name} (load average {os.getloadavg()[0]:.1f}): ms")
            for _ in range(args.rounds):
                spent = run_once(model_file(name), Path(folder) / "out.onnx", CHILD)
                print("  " + " ".join(f"{k} {v:.0f}" for k, v in spent.items()))


if __name__ == "__main__":
    main()
