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
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Run before `tool_stages.CHILD`, whose `lap(stage)` at each stage's end then calls
#: `memory(stage)`; its last line prints `rows` instead of its CPU seconds.
MEMORY = """
import resource
def status():
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmHWM", "VmRSS"):
                found[key] = int(line.split()[1]) / 1024
    return found["VmHWM"], found["VmRSS"]
rows, total = {}, [0.0]
def memory(stage):
    peak, rss = status()
    total[0] = max(total[0], peak)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    row = rows.setdefault(stage, [0.0, 0.0, 0])
    row[0], row[1], row[2] = max(row[0], peak), rss, faults
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) from here on
def whole_run():
    rows["= whole run"] = [total[0], status()[1],
                           resource.getrusage(resource.RUSAGE_SELF).ru_minflt]
    return rows
"""


def child() -> str:
    """`tool_stages.CHILD`, each lap also recording memory, printing the memory rows."""
    from tool_stages import CHILD

    text = CHILD.replace("def lap(stage):\n", "def lap(stage):\n    memory(stage)\n", 1)
    text = text.replace("print(json.dumps(cpu)", "print(json.dumps(whole_run())", 1)
    if text.count("memory(stage)") != 1 or "whole_run()" not in text:
        raise RuntimeError("tool_stages.CHILD changed: its lap or its last print not found")
    return MEMORY + text


def run_once(model: Path, out: Path) -> dict[str, list[float]]:
    import tool_stages

    return tool_stages.run_once(model, out, child())


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
