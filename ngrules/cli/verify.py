"""`ngrules verify [PATH...]`: every rule checked numerically on instances of its pattern."""

from __future__ import annotations

import sys

from ngrules.cli.common import (
    FINDINGS,
    add_command,
    add_import_path_option,
    rules_or_library,
)


def run(args) -> int:
    from hypothesis import settings

    from ngrules.verification.profiles import register_profiles
    from ngrules.verification.verify import verify

    register_profiles()
    settings.load_profile("ci")  # derandomized: the same verdicts on every run
    rules = rules_or_library(args.paths, args.import_path)
    report = verify(rules, examples=args.examples, on_rule=_progress)
    print(file=sys.stderr)
    print(report)
    return 0 if report.ok else FINDINGS


def _progress(i: int, n: int, rule) -> None:
    """A one-line progress bar on stderr, redrawn in place."""
    done = 30 * (i - 1) // n
    bar = "#" * done + "-" * (30 - done)
    print(f"\r[{bar}] {i}/{n} {rule.name:32.32s}", end="", file=sys.stderr, flush=True)


def register(sub) -> None:
    p = add_command(
        sub,
        "verify",
        run,
        "verify every rule numerically on its own instances",
        "ngrules verify rules/ --examples 50",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="default: the shipped library")
    add_import_path_option(p)
    p.add_argument("--examples", type=int, default=None,
                   help="instances each rule must fire on (default: 40, hypothesis's ci profile)")
