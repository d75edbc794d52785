"""`ngrules fmt PATH... [--check]`: canonical formatting of rules files, written atomically.

A file that is a symbolic link stays one: its target is formatted, if it is inside the folder
given (or, for a file given by name, its own folder); a link out of it is an error and
nothing is written. A replaced file keeps its permission bits.
"""

from __future__ import annotations

import difflib
import sys

from ngrules.cli.common import FINDINGS, add_command
from ngrules.errors import RuleError, RuleErrors


def run(args) -> int:
    from ngrules.ir.fileio import staged_files
    from ngrules.lang.layout import format_rules
    from ngrules.lang.loader import expand_paths, read_source
    from ngrules.lang.parser import parse

    changed, errors = [], []
    for path in expand_paths(args.paths):
        text = read_source(path)
        try:
            formatted = format_rules(parse(text, path))
        except RuleError as e:  # every file's syntax error, then exit 1 as `check` does
            errors.append(e)
            continue
        if formatted != text:
            changed.append((path, text, formatted))
    if errors:
        raise RuleErrors(errors)
    if args.check:
        for path, text, formatted in changed:
            sys.stdout.writelines(
                difflib.unified_diff(
                    text.splitlines(keepends=True), formatted.splitlines(keepends=True),
                    fromfile=path, tofile=f"{path} (formatted)",
                )
            )
            print(f"would reformat {path}")
        return FINDINGS if changed else 0
    with staged_files() as stage:
        for path, _, formatted in changed:
            stage(path, lambda f, t=formatted: f.write(t), text=True)
    for path, _, _ in changed:
        print(f"reformatted {path}")
    return 0


def register(sub) -> None:
    p = add_command(sub, "fmt", run, "format rules files canonically",
                    "ngrules fmt rules/ --check", ops="none")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--check", action="store_true",
                   help="only report files that would change, with a unified diff")
