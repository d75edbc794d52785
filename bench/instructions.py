"""Instructions per rewrite of the peers' workloads, for changes too small for timing.

On a machine shared with other work, `ab.py`'s rounds scatter by 20-40%, more than a step of a
few percent changes. Instructions do not depend on the load: `--callgrind` runs this script
twice under valgrind's callgrind (building the graphs, then rewriting them `--rewrites` times
or not at all) and prints the difference per rewrite. Without it, the script only builds and
rewrites (what callgrind counts). `PYTHONHASHSEED` is fixed and, where `setarch` exists, address
space randomisation is off (nodes hash by their address): two counts of one tree then agree
within about 0.5% (about 2% with it on), and numpy's BLAS runs one thread (its pool thread's
spinning was counted too, up to 6%). Two trees still differ in their memory layout, which
moves a count by a few percent on its own: a step of 1-3% is not shown by one pair of counts.

Run: `python bench/instructions.py --harness PATH/TO/peers --workload W2 --size 10000
--callgrind [--tree PATH]` (`--tree`: a checkout whose `ngrules/` is measured instead of this
one, e.g. `git archive REV ngrules grammar rules | tar -x -C PATH`).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def rewrite_times(harness: Path, workload: str, size: int, rewrites: int, pad: int = 0) -> None:
    """Build two graphs of the workload, then rewrite them `rewrites` times in turn. `pad`
    nodes built first and kept shift where the graphs' nodes lie (another memory layout)."""
    sys.path[:0] = [str(harness), str(HERE)]
    from peer_adapter import NgrulesAdapter
    from workloads import make_spec

    import ngrules as ng

    adapter = NgrulesAdapter()
    spec = make_spec(workload, size)
    padding = [ng.placeholder([adapter.N], name="pad")]
    for _ in range(pad):
        padding.append(ng.negative(padding[-1]))
    graphs = [adapter.build(spec) for _ in range(2)]
    gc.collect()
    gc.disable()
    for i in range(rewrites):
        result = adapter.rewrite(graphs[i % 2], spec)
        assert result.stop == "fixpoint", result.message


#: Run with the address space unrandomised (`setarch -R`), where the tool exists: nodes hash
#: by address, so the dictionaries' collisions, and the count, vary from run to run otherwise.
_NO_ASLR = ["setarch", platform.machine(), "-R"] if shutil.which("setarch") else []


def _instructions(args, rewrites: int, pad: int) -> int:
    command = [
        *_NO_ASLR, "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
        __file__, "--harness", str(args.harness), "--workload", args.workload,
        "--size", str(args.size), "--rewrites", str(rewrites), "--pad", str(pad),
    ]
    # one thread: numpy's BLAS pool thread would be counted too, as much as it waits
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if args.tree:
        env["PYTHONPATH"] = str(args.tree)
    run = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return int(re.search(r"Collected : (\d+)", run.stderr).group(1))


def main(argv: list[str] | None = None) -> int | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", type=Path, required=True, help="the peers' folder")
    parser.add_argument("--workload", default="W2")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rewrites", type=int, default=2)
    parser.add_argument("--callgrind", action="store_true", help="count under valgrind")
    parser.add_argument("--tree", type=Path, help="measure this checkout's ngrules/")
    parser.add_argument("--pad", type=int, default=0, help="nodes built before the graphs")
    parser.add_argument("--layouts", type=int, default=1, choices=range(1, len(_PADS) + 1),
                        help="count with this many paddings (memory layouts), give the mean")
    args = parser.parse_args(argv)
    if not args.callgrind:
        rewrite_times(args.harness, args.workload, args.size, args.rewrites, args.pad)
        return None
    counts = []
    for pad in _PADS[: args.layouts]:
        both = _instructions(args, args.rewrites, pad) - _instructions(args, 0, pad)
        counts.append(both // args.rewrites)
    per_rewrite = sum(counts) // len(counts)
    each = f" (layouts: {', '.join(f'{c / 1e6:.1f}M' for c in counts)})" if len(counts) > 1 else ""
    print(f"{args.workload} {args.size} nodes: {per_rewrite} instructions per rewrite{each}")
    return per_rewrite


#: Paddings for `--layouts`: the first is none (a single count is what it was).
_PADS = (0, 97, 331, 613, 1009)


if __name__ == "__main__":
    main()
