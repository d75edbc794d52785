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
        print(str(e), file=sys.stderr)
        print(f"{len(e.errors)} error(s)", file=sys.stderr)
        return FINDINGS
    print(f"ok: {len(rules)} rules in {len(rules.passes)} passes, {len(rules.pipelines)} pipelines")
    return 0


def register(sub) -> None:
    p = add_command(
        sub, "check", run, "load and check rules files or folders", "ngrules check rules/"
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    add_import_path_option(p)
