"""One change measured side by side: the engine of a git revision against the worktree's, in one
process, taking turns, on the peers' workloads (and the `plain` pass as the common yardstick).

Two engines in one process: the revision's `ngrules/` is extracted to a temporary folder as a
package named `ngrules_base` (its imports renamed), and the peers' adapter is loaded once per
package. Each round times one rewrite by each engine and by `plain` (GC paused, CPU time), so
load changes affect them alike; the report gives the medians of the round-by-round ratios.

Run: `python bench/ab.py --harness PATH/TO/peers --base REV [--sizes 100k] [--rounds 7]`.
"""

from __future__ import annotations

import argparse
import importlib
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
_IMPORT = re.compile(r"\bngrules(?=[. ]|$)", re.M)


def base_package(rev: str) -> Path:
    """The revision's `ngrules/` as the package `ngrules_base` in a new temporary folder."""
    root = Path(tempfile.mkdtemp(prefix="ngrules_ab_"))
    archive = subprocess.run(
        ["git", "-C", str(HERE.parent), "archive", rev, "ngrules", "grammar", "rules"],
        check=True, capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    (root / "ngrules").rename(root / "ngrules_base")
    for path in (root / "ngrules_base").rglob("*.py"):
        path.write_text(_rename(path.read_text()))
    return root


def _rename(source: str) -> str:
    lines = source.splitlines()
    imports = [line.lstrip().startswith(("from ", "import ")) for line in lines]
    renamed = [_IMPORT.sub("ngrules_base", x) if i else x for x, i in zip(lines, imports)]
    return "\n".join(renamed) + "\n"


def adapter_on(package: str):
    """The peers' adapter (bench/peer_adapter.py) running on `package`."""
    source = (HERE / "peer_adapter.py").read_text()
    if package != "ngrules":
        source = _rename(source)
    module = type(sys)(f"peer_adapter_{package}")
    module.__file__ = str(HERE / "peer_adapter.py")
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102 - our file
    return module.NgrulesAdapter()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", type=Path, required=True)
    parser.add_argument("--base", required=True, help="git revision to compare with")
    parser.add_argument("--sizes", default="100k")
    parser.add_argument("--workloads", default="W1,W2")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    sys.path[:0] = [str(base_package(args.base)), str(args.harness), str(HERE)]
    from adapters.plain_peer import PlainAdapter
    from peers import _size, time_one
    from workloads import make_spec

    importlib.import_module("ngrules_base")
    engines = {"base": adapter_on("ngrules_base"), "new": adapter_on("ngrules"),
               "plain": PlainAdapter()}
    print(f"{'workload':8s} {'nodes':>8s} {'new/base speed':>22s} {'new x plain':>12s}"
          f" {'base x plain':>13s} {'new ms':>8s}")
    for w in args.workloads.split(","):
        for s in args.sizes.split(","):
            spec = make_spec(w, _size(s))
            times: dict[str, list[float]] = {k: [] for k in engines}
            for _ in range(args.rounds):
                for name, engine in engines.items():
                    times[name].append(time_one(engine, spec, time.process_time))
            speed = sorted(b / n for b, n in zip(times["base"], times["new"]))
            new = statistics.median(p / n for p, n in zip(times["plain"], times["new"]))
            base = statistics.median(p / b for p, b in zip(times["plain"], times["base"]))
            print(f"{w:8s} {spec.n_ops:8d} {statistics.median(speed):8.3f} "
                  f"({speed[0]:.2f}-{speed[-1]:.2f}) {new:12.3f} {base:13.3f} "
                  f"{statistics.median(times['new']) * 1e3:8.1f}")


if __name__ == "__main__":
    main()
