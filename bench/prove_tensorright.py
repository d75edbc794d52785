"""TensorRight's XLA rewrites (tests/corpus/tensorright/xla.rules) proved: each rule's verdict,
its seconds, and the counts (expressed, proved for every shape, in IEEE floats, over 60 s).

Run: python bench/prove_tensorright.py [--jobs 2] [--only NAME ...]   (the full prove run, or
the rules named; the test suite only loads the file and proves a small sample,
tests/test_tensorright_corpus.py)
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from pathlib import Path

from hypothesis import settings

import ngrules as ng
from ngrules.verification.profiles import register_profiles
from ngrules.verification.verify import verify

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus" / "tensorright" / "xla.rules"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these rules only")
    args = parser.parse_args(argv)
    rules = ng.load_rules(CORPUS)
    load, start = os.getloadavg()[0], time.perf_counter()
    # measured, not recalled: no verdict cache
    report = verify(rules, prove=True, jobs=args.jobs, cache=False, only=args.only)
    wall = time.perf_counter() - start
    print("| rule | verdict | seconds | reason |\n|---|---|---:|---|")
    for v in report:
        reason = v.headline.split(": ", 1)[1][:110]
        print(f"| {v.rule.name} | {v.status} | {v.seconds:.1f} | {reason} |")
    counts = Counter(v.status for v in report)
    every = [v for v in report if v.status in ("proved", "proved-reals") and v.bound is None]
    slow = [v.rule.name for v in report if v.seconds >= 60]
    print(f"\n{len(report)} expressed; {len(every)} proved for every shape "
          f"({counts['proved']} in IEEE floats, {counts['proved-reals']} over the reals; "
          f"{counts['loops']} more loop, each step proved); {dict(counts)}; "
          f"{len(slow)} took 60 s or more {slow}; {wall:.0f} s wall, --jobs {args.jobs}, "
          f"load {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    return 0


if __name__ == "__main__":
    register_profiles()
    settings.load_profile("ci")
    raise SystemExit(main())
