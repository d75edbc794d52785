"""Verifying the shipped library: cold (no cache) with --jobs 1 and 2, then warm (every verdict
from the verdict cache), as `ngrules verify rules/` runs it (the derandomized ci profile).

    PYTHONPATH=$PWD python bench/verify_library.py [--jobs 1,2]

Wall and CPU seconds (this process and its workers) per run, and the verdict counts. The
cache lives in a temporary folder (NGRULES_VERDICT_CACHE), never the user's. On a shared
machine wall time follows the load; CPU time (user + system) does not.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run(jobs: int, cache: bool) -> tuple[float, float, str]:
    from hypothesis import settings

    import ngrules as ng
    from ngrules.verification.profiles import register_profiles
    from ngrules.verification.verify import verify

    register_profiles()
    settings.load_profile("ci")
    rules = ng.load_library()
    wall, cpu = time.perf_counter(), _cpu()
    report = verify(rules, jobs=jobs, cache=cache)
    return time.perf_counter() - wall, _cpu() - cpu, report.summary()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", default="1,2", help="the cold runs' --jobs, comma-separated")
    args = p.parse_args(argv)
    os.environ["NGRULES_VERDICT_CACHE"] = tempfile.mkdtemp(prefix="ngrules-bench-verdicts-")
    print(f"load average at start: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    for jobs in (int(j) for j in args.jobs.split(",")):
        wall, cpu, summary = run(jobs, cache=False)
        print(f"cold --jobs {jobs}: {wall:6.1f} s wall, {cpu:6.1f} s CPU  ({summary})")
    run(1, cache=True)  # fills the cache (a cold run of its own)
    wall, cpu, summary = run(1, cache=True)
    print(f"warm --jobs 1: {wall:6.1f} s wall, {cpu:6.1f} s CPU  ({summary})")


if __name__ == "__main__":
    main()
