"""`ngrules verify --prove` on the shipped library: each rule's verdict and seconds, totals.

Run: python bench/prove_library.py [--jobs 2] [--corpus] [PATH...]   (default: the library)

Prints a markdown table (rule, verdict, seconds), the verdicts counted (proved in IEEE floats,
proved over the reals, the others), the wall time and the load average before and after (a
shared machine: the load says how much of the wall time was waiting for a core). `--corpus`
also proves tests/corpus/wrong (each file on its own, as tests/test_corpus.py verifies it)
and counts the rules proved there: it must be 0, every one of those rules is wrong.
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

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus" / "wrong"
PROVED = ("proved", "proved-reals")
#: Any proof verdict: a bounded one in the wrong corpus is a wrong rule testing missed.
ANY_PROOF = (*PROVED, "proved-bounded")


def table(report) -> list[str]:
    rows = ["| rule | verdict | seconds |", "|---|---|---:|"]
    rows += [f"| {v.rule.name} | {v.status} | {v.seconds:.1f} |" for v in report]
    return rows


def totals(report) -> str:
    counts = Counter(v.status for v in report)
    proved = counts["proved"] + counts["proved-reals"]
    others = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()) if s not in PROVED)
    return (f"{proved} of {len(report)} rules proved ({counts['proved']} in IEEE floats, "
            f"{counts['proved-reals']} over the reals){'; ' + others if others else ''}; "
            f"slowest {max((v.seconds for v in report), default=0):.1f} s")


def prove(paths, jobs: int, bound: int):
    rules = ng.load_rules(*paths) if paths else ng.load_library()
    return verify(rules, prove=True, bound=bound, jobs=jobs)


def corpus(jobs: int, bound: int) -> tuple[int, int, list[str]]:
    """(rules proved, rules) in the wrong corpus, and the names of those proved."""
    proved, count = [], 0
    for path in sorted(CORPUS.glob("*.rules")):
        rules = list(ng.load_rules(path).rules)  # each rule on its own, as the corpus test
        report = verify(rules, prove=True, bound=bound, jobs=jobs)
        count += len(report)
        proved += [f"{path.stem}:{v.rule.name}" for v in report if v.status in ANY_PROOF]
    return len(proved), count, proved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--bound", type=int, default=3)
    parser.add_argument("--corpus", action="store_true")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    report = prove(args.paths, args.jobs, args.bound)
    wall = time.perf_counter() - start
    print("\n".join(table(report)))
    print(f"\n{totals(report)}; {wall:.0f} s wall with --jobs {args.jobs} on {os.cpu_count()} "
          f"cores, load average {load:.1f} before and {os.getloadavg()[0]:.1f} after")
    if args.corpus:
        start = time.perf_counter()
        proved, count, names = corpus(args.jobs, args.bound)
        print(f"wrong corpus: {proved} of {count} rules proved "
              f"({time.perf_counter() - start:.0f} s){': ' + ', '.join(names) if names else ''}")
    return 0


if __name__ == "__main__":
    register_profiles()
    settings.load_profile("ci")  # derandomized, as `ngrules verify`
    raise SystemExit(main())
