"""Warm commands side by side: `ngrules check rules/` and `ngrules verify rules/` (both read
from the private caches: the parsed rules, the compiled code, the verdicts) run by the
worktree's code and by a git revision's, taking turns, each a fresh process.

The revision's tree is extracted to a temporary folder (`git archive`); each side runs in its
own tree (`python -c` puts the working folder first on the import path) on its `rules/`. One
untimed run of each warms the caches; the report gives each side's median wall and CPU time and
the median of the round-by-round differences (worktree minus revision): load changes affect both
alike.

Run: `python bench/warm_commands.py --base REV [--rounds 9]`.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
COMMANDS = {"check": ["check", "rules/"], "verify": ["verify", "rules/"]}


def extracted(rev: str) -> Path:
    """The revision's tree in a new temporary folder."""
    root = Path(tempfile.mkdtemp(prefix="ngrules_warm_"))
    archive = subprocess.run(["git", "-C", str(HERE), "archive", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root


def timed(tree: Path, args: list[str]) -> tuple[float, float]:
    """The command's wall and CPU (user + system) seconds."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before, start = _children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "from ngrules.cli import main; main()", *args],
                          cwd=tree, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start, _children_cpu() - before
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return took


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main")
    parser.add_argument("--rounds", type=int, default=9)
    opts = parser.parse_args()
    trees = {"worktree": HERE, opts.base: extracted(opts.base)}
    for name, args in COMMANDS.items():
        for tree in trees.values():
            timed(tree, args)  # warm
        times: dict[str, list[tuple[float, float]]] = {side: [] for side in trees}
        for i in range(opts.rounds):
            order = list(trees) if i % 2 == 0 else list(reversed(trees))
            for side in order:
                times[side].append(timed(trees[side], args))
        for k, what in enumerate(("wall", "CPU")):
            runs = {side: [t[k] for t in ts] for side, ts in times.items()}
            diffs = [a - b for a, b in zip(*runs.values())]
            medians = ", ".join(f"{side} {statistics.median(t) * 1e3:.0f} ms"
                                for side, t in runs.items())
            print(f"{name} ({what}): {medians}; worktree - {opts.base}: median "
                  f"{statistics.median(diffs) * 1e3:+.1f} ms over {opts.rounds} rounds "
                  f"(min {min(diffs) * 1e3:+.1f}, max {max(diffs) * 1e3:+.1f})")

if __name__ == "__main__":
    main()
