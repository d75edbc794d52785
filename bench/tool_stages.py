"""Where the CPU of one `ngrules apply --pipeline inference -o out.onnx` goes (issue 34, item 6):
the command run in a fresh process, its stages timed by wrapping the functions that do them
(process CPU seconds, all threads: the file read on its thread is counted in `onnx import`, the
file written on its thread in `check + write`), the median of `--rounds` runs per stage, with
the run's user and sys seconds and the load average (a shared machine: sys time, mostly the
kernel giving the process fresh memory, varies several-fold from run to run).

The models are `tool_speed.py`'s (onnx's ResNet-50 and VGG-19 at opset 9, random weights).
Run: `python bench/tool_stages.py [--models resnet50,vgg19] [--rounds 5]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (module, function, stage): the stage a call of the function is, timed from the end of the
#: stage before it (what runs in between is `other`).
WRAPPED = [
    ("ngrules.interop.onnx.importing.loading", "require_onnx", "onnx import"),
    ("ngrules.interop.onnx.weights", "split", "read + parse"),
    ("ngrules.interop.onnx.importer", "check_model", "input check"),
    ("ngrules.interop.onnx.importer", "import_model", "import"),
    ("ngrules.cli.apply", "rules_or_library", "rules"),
    ("ngrules.cli.apply", "_rewrite", "rewrite"),
    ("ngrules.interop.onnx.exporter", "export_parts", "export"),
    ("ngrules.interop.onnx.weights", "write", "check + write"),
]

CHILD = """
import importlib, json, os, runpy, sys, time
mark = [time.process_time()]
cpu = {}
def lap(stage):
    now = time.process_time()
    cpu[stage] = cpu.get(stage, 0.0) + now - mark[0]
    mark[0] = now
startup = os.path.join(os.environ["PYTHONPATH"], "ngrules", "startup.py")
if os.path.exists(startup):  # the settings the `ngrules` program makes first (older trees: none)
    runpy.run_path(startup)["as_the_program"]()
import ngrules.cli.main
lap("cli import")
def wrapped(f, stage):
    def g(*a, **k):
        lap("other")
        try:
            return f(*a, **k)
        finally:
            lap(stage)
    return g
for module, name, stage in json.loads(sys.argv[1]):
    m = importlib.import_module(module)
    setattr(m, name, wrapped(getattr(m, name), stage))
try:
    cli = sys.modules["ngrules.cli.main"]
    getattr(cli, "as_program", lambda: None)()  # as the `ngrules` program runs (older trees: none)
    cli.main(sys.argv[2:])
except SystemExit:
    pass
lap("other")
t = os.times()
cpu["= user"], cpu["= sys"] = t.user, t.system
print(json.dumps(cpu), file=sys.stderr)
"""


def run_once(model: Path, out: Path, child: str = CHILD) -> dict:
    """The last line the child code printed, from a fresh process (`tool_memory` gives its own
    child code)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    cmd = [sys.executable, "-P", "-c", child, json.dumps(WRAPPED), "apply", str(model),
           "--pipeline", "inference", "-o", str(out), "-q"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-500:])
    return json.loads(proc.stderr.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,vgg19")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ngrules-stages-") as folder:  # the outputs removed
        _measure(args, Path(folder) / "out.onnx")


def _measure(args, out: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tool_speed import model_file

    for name in args.models.split(","):
        path = model_file(name)
        run_once(path, out)  # warm: bytecode, caches, the file in memory
        runs = [run_once(path, out) for _ in range(args.rounds)]
        print(f"{name}: median CPU seconds of {args.rounds} fresh runs (load average "
              f"{os.getloadavg()[0]:.1f})")
        for stage in runs[0]:
            values = [r.get(stage, 0.0) for r in runs]
            print(f"  {stage:14s} {statistics.median(values):6.3f}  (min {min(values):.3f}, "
                  f"max {max(values):.3f})")


if __name__ == "__main__":
    main()
