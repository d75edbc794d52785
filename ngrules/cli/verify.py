"""`ngrules verify [PATH...]`: every rule checked numerically on instances of its pattern, or
proved with `--prove` (z3, the `prove` extra)."""

from __future__ import annotations

import sys

from ngrules.cli.common import (
    FINDINGS,
    INTERRUPTED,
    add_command,
    add_disable_option,
    add_import_path_option,
    at_least,
    rules_or_library,
    without_rules,
)


def run(args) -> int:
    from hypothesis import settings

    from ngrules.verification.profiles import register_profiles
    from ngrules.verification.verify import Interrupted, verify

    if args.prove:
        from ngrules.verification.prove import require_z3

        require_z3()  # an NgrulesError saying how to install it: one line, exit 2
    register_profiles()
    settings.load_profile("ci")  # derandomized: the same verdicts on every run
    rules = without_rules(rules_or_library(args.paths, args.import_path), args.disable)  # as apply
    only = None if args.with_imports or not args.paths else _defined_in(rules, args.paths)
    progress = _progress if sys.stderr.isatty() else None
    try:
        report = verify(
            rules,
            examples=args.examples,
            semantics="refine" if args.refine else "strict",
            prove=args.prove,
            bound=args.bound,
            on_rule=progress,
            only=only,
            seed=args.seed,
            jobs=args.jobs,
            floats="reals" if args.reals else "ieee",
        )
    except Interrupted as stop:
        _end_progress(progress)
        print(stop.report)
        print("ngrules: interrupted; the verdicts above are those computed so far",
              file=sys.stderr)
        return INTERRUPTED
    _end_progress(progress)
    print(report)
    return 0 if report.ok else FINDINGS


def _defined_in(rules, paths: list[str]) -> list[str]:
    """The names of the rules the files at `paths` define (not those they import)."""
    from pathlib import Path

    from ngrules.lang.loader import expand_paths

    files = {Path(f).resolve() for f in expand_paths(paths)}
    return [r.name for r in rules.rules
            if r.span is not None and Path(r.span.file).resolve() in files]


def _progress(i: int, n: int, rule) -> None:
    """A one-line progress bar on stderr (a terminal), redrawn in place."""
    done = 30 * (i - 1) // n
    bar = "#" * done + "-" * (30 - done)
    print(f"\r[{bar}] {i}/{n} {rule.name:32.32s}", end="", file=sys.stderr, flush=True)


def _end_progress(progress) -> None:
    if progress is not None:
        print(file=sys.stderr)


def register(sub) -> None:
    p = add_command(
        sub,
        "verify",
        run,
        "verify every rule numerically on its own instances, or prove it",
        "ngrules verify rules/ --examples 50",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="default: the shipped library")
    add_import_path_option(p)
    p.add_argument("--examples", type=at_least(1), default=None,
                   help="instances each rule must fire on (default: 40, hypothesis's ci profile)")
    p.add_argument("--refine", action="store_true",
                   help="refinement semantics: a rule may make an undefined (NaN, inf) result "
                   "defined (default: strict, NaN stays NaN and inf the same inf)")
    p.add_argument("--reals", action="store_true",
                   help="judge values as real numbers: positions where float64 overflowed or "
                   "cancelled are not judged (default: IEEE floats, where an overflow, "
                   "cancellation or NaN on one side only is wrong)")
    p.add_argument("--prove", action="store_true",
                   help="prove rules with the z3 SMT solver first (pip install 'ngrules[prove]')")
    p.add_argument("--bound", type=at_least(1), default=3,
                   help="with --prove: axis lengths up to this are unrolled (default: 3)")
    p.add_argument("--with-imports", action="store_true",
                   help="also verify the rules the files import (default: only those they "
                   "define; an imported rule still takes its nodes in its pass)")
    p.add_argument("--seed", type=at_least(0), default=None,
                   help="seed every draw (instances, special values, narrow dtypes) with N "
                   "(default: the fixed draws of the derandomized ci profile)")
    p.add_argument("--jobs", "-j", type=at_least(1), default=1,
                   help="rules judged at once in worker processes (default: 1; the verdicts "
                   "are the same)")
    add_disable_option(p)
