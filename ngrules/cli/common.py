"""What every command shares: exit codes, how a command is declared, the default rules."""

from __future__ import annotations

import argparse
from collections.abc import Callable

FINDINGS, BAD_INPUT, INTERRUPTED = 1, 2, 130


def add_command(sub, name: str, run: Callable, help_: str, example: str) -> argparse.ArgumentParser:
    """One subcommand: its help doubles as description, its epilog shows an example."""
    p = sub.add_parser(name, help=help_, description=help_, epilog=f"example: {example}")
    p.set_defaults(run=run)
    return p


def rules_or_library(paths: list[str] | None, import_path: list[str] | None = None):
    """The rules in `paths`, or the shipped library when none are given."""
    from ngrules.lang.library import load_library
    from ngrules.lang.loader import load_rules

    return load_rules(*paths, search_path=import_path or ()) if paths else load_library()


def add_import_path_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--import-path", action="append", default=[], metavar="DIR",
        help="a folder that `import` may read .rules files from besides the folders loaded "
        "(repeatable)",
    )


def add_rules_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", nargs="+", metavar="PATH", help="default: the shipped library")
    add_import_path_option(p)
