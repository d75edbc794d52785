"""Where the memory of one `ngrules apply --pipeline inference -o out.onnx` goes (issue 34,
item 6: peak resident memory <= 2x the model file): the command run in a fresh process, its
stages those of `tool_stages.py` (the same wrapped functions), and for each stage the peak
resident set during it (VmHWM, reset at the stage's start by writing 5 to
/proc/self/clear_refs) and the resident set at its end (VmRSS), in MiB, with the process's
minor page faults; the median of `--rounds` runs. The whole run's peak is reported over the
model file's size, as the item states its bound.

Run: `python bench/tool_memory.py [--models resnet50,vgg19] [--rounds 3]`.
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

CHILD = """
import importlib, json, os, resource, sys
def status():
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmHWM", "VmRSS"):
                found[key] = int(line.split()[1]) / 1024
    return found["VmHWM"], found["VmRSS"]
def reset():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
rows, total = {}, [0.0]
def lap(stage):
    peak, rss = status()
    total[0] = max(total[0], peak)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    row = rows.setdefault(stage, [0.0, 0.0, 0])
    row[0], row[1], row[2] = max(row[0], peak), rss, faults
    reset()
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
    sys.modules["ngrules.cli.main"].main(sys.argv[2:])
except SystemExit:
    pass
lap("other")
rows["= whole run"] = [total[0], status()[1], resource.getrusage(resource.RUSAGE_SELF).ru_minflt]
print(json.dumps(rows), file=sys.stderr)
"""


def run_once(model: Path, out: Path) -> dict[str, list[float]]:
    from tool_stages import WRAPPED

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    cmd = [sys.executable, "-P", "-c", CHILD, json.dumps(WRAPPED), "apply", str(model),
           "--pipeline", "inference", "-o", str(out), "-q"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-500:])
    return json.loads(proc.stderr.strip().splitlines()[-1])


def main(argv=None) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,vgg19")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ngrules-memory-") as folder:  # removed after
        for name in args.models.split(","):
            report(name, Path(folder) / "out.onnx", args.rounds)


def report(name: str, out: Path, rounds: int) -> None:
    """One model's table: each stage's median peak, resident set at its end, minor faults."""
    from tool_speed import model_file

    path = model_file(name)
    size = path.stat().st_size / 2**20
    run_once(path, out)  # warm: bytecode, caches, the file in memory
    runs = [run_once(path, out) for _ in range(rounds)]
    print(f"{name} ({size:.0f} MiB file): median of {rounds} fresh runs, MiB "
          f"(load average {os.getloadavg()[0]:.1f})")
    print(f"  {'stage':14s} {'peak':>7s} {'at end':>7s} {'minor faults':>13s}")
    for stage in runs[0]:
        peak, rss, faults = (statistics.median(r[stage][i] for r in runs if stage in r)
                             for i in range(3))
        print(f"  {stage:14s} {peak:7.1f} {rss:7.1f} {faults:13.0f}")
    peaks = [r["= whole run"][0] for r in runs]
    print(f"  peak / file: median {statistics.median(peaks) / size:.2f}x, "
          f"min {min(peaks) / size:.2f}x, max {max(peaks) / size:.2f}x")


if __name__ == "__main__":
    main()
