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
    positive_seconds,
    rules_or_library,
    without_rules,
)
from ngrules.verification.prove import DEFAULT_MEGABYTES, DEFAULT_SECONDS


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
    if args.rule:
        only = _named(rules, args.rule, only)
    try:
        report = verify(
            rules,
            examples=args.examples,
            semantics="refine" if args.refine else "strict",
            prove=args.prove,
            bound=args.bound,
            prove_rank=args.prove_rank,
            only=only,
            seed=args.seed,
            jobs=args.jobs,
            opset=args.opset,
            prove_budget=(args.prove_seconds, args.prove_memory),
            floats="reals" if args.reals else "ieee",
            cache=not args.no_cache,
            progress=sys.stderr.isatty(),
        )
    except Interrupted as stop:
        print(stop.report)
        print("ngrules: interrupted; the verdicts above are those computed so far",
              file=sys.stderr)
        return INTERRUPTED
    print(report)
    return 0 if report.ok else FINDINGS


def _defined_in(rules, paths: list[str]) -> list[str]:
    """The names of the rules the files at `paths` define (not those they import)."""
    from pathlib import Path

    from ngrules.lang.loader import expand_paths

    files = {Path(f).resolve() for f in expand_paths(paths)}
    return [r.name for r in rules.rules
            if r.span is not None and Path(r.span.file).resolve() in files]


def _named(rules, names: list[str], only: list[str] | None) -> list[str]:
    """`--rule NAME`: the rules named, each one the files define (or, with --with-imports or
    no files, any rule loaded); an unknown name is an error with the closest names."""
    from ngrules.errors import NgrulesError
    from ngrules.ir.ops import did_you_mean

    known = only if only is not None else [r.name for r in rules.rules]
    for name in names:
        if name not in known:
            raise NgrulesError(f"--rule: no rule {name!r} to verify{did_you_mean(name, known)}")
    return list(names)


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
    p.add_argument("--prove-length", "--bound", dest="bound", type=at_least(1), default=3,
                   metavar="L", help="with --prove: where no proof for every shape exists, "
                   "every shape with axis lengths up to L is enumerated and proved (default: 3)")
    p.add_argument("--prove-rank", type=at_least(0), default=3, metavar="R",
                   help="with --prove: ... and ranks up to R (default: 3); the verdict says "
                   "`proved for ranks <= R and lengths <= L`, and the rule is still tested")
    p.add_argument("--prove-seconds", type=positive_seconds, default=DEFAULT_SECONDS, metavar="S",
                   help="with --prove: CPU seconds one rule's proof may take; past them the "
                   f"rule is unverified, saying so (default: {DEFAULT_SECONDS:g})")
    p.add_argument("--prove-memory", type=at_least(1), default=DEFAULT_MEGABYTES, metavar="MB",
                   help="with --prove: megabytes z3 may use in one rule's proof (z3's "
                   f"memory_max_size; default: {DEFAULT_MEGABYTES})")
    p.add_argument("--with-imports", action="store_true",
                   help="also verify the rules the files import (default: only those they "
                   "define; an imported rule still takes its nodes in its pass)")
    p.add_argument("--seed", type=at_least(0), default=None,
                   help="seed every draw (instances, special values, narrow dtypes) with N "
                   "(default: the fixed draws of the derandomized ci profile)")
    p.add_argument("--jobs", "-j", type=at_least(1), default=1,
                   help="rules judged at once in worker processes (default: 1; the verdicts "
                   "are the same)")
    p.add_argument("--rule", action="append", default=[], metavar="NAME",
                   help="verify only the rule NAME (repeatable); the others still take their "
                   "nodes in their passes")
    p.add_argument("--no-cache", action="store_true",
                   help="verify every rule again, neither reading nor keeping verdicts in the "
                   "verdict cache (~/.cache/ngrules/verdicts)")
    add_disable_option(p)
    p.add_argument("--opset", type=int, choices=range(17, 24), default=None, metavar="17..23",
                   help="the ONNX opset a declared op's `onnx` clause is run at under "
                        "onnxruntime (default 17; an op of a newer opset needs its opset)")
