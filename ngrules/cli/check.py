"""`ngrules check PATH...`: load and check rules, every diagnostic located."""

from __future__ import annotations

import sys

from ngrules.cli.common import FINDINGS, add_command, add_import_path_option
from ngrules.errors import RuleErrors


def run(args) -> int:
    from ngrules.lang.loader import load_rules

    try:
        rules = load_rules(*args.paths, search_path=args.import_path)
    except RuleErrors as e:
        return report_errors(e)
    for w in rules.warnings:  # the load succeeded; each says where to look
        print(str(w).replace(": error: ", ": warning: ", 1), file=sys.stderr)
    ops = f", {counted(len(rules.ops), 'declared op')}" if rules.ops else ""
    print(
        f"ok: {counted(len(rules), 'rule')} in {counted(len(rules.passes), 'pass', 'passes')}, "
        f"{counted(len(rules.pipelines), 'pipeline')}" + ops
    )
    return 0


def counted(n: int, one: str, many: str | None = None) -> str:
    """`1 pass`, `2 passes`: the number with its noun in the right number."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def report_errors(e: RuleErrors) -> int:
    """Every check error on stderr, then their count: what `check` and every other command
    that loads rules print for a rules file with errors; the exit code `FINDINGS`."""
    print(_render(e), file=sys.stderr)
    print(f"{len(e.errors)} error(s)", file=sys.stderr)
    return FINDINGS


def _render(e: RuleErrors) -> str:
    """The errors with their snippets; highlighted, caret in red, when stderr is a terminal."""
    from ngrules.lang.highlight import colour_wanted, coloured_error

    if not colour_wanted(sys.stderr):
        return str(e)
    return "\n".join(coloured_error(err) for err in e.errors)


def register(sub) -> None:
    p = add_command(
        sub, "check", run, "load and check rules files or folders", "ngrules check rules/"
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    add_import_path_option(p)
