"""The `ngrules` command line."""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .errors import NgrulesError


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ngrules",
        description="Declarative rewrite rules for named-axes tensor graphs.",
        epilog="example: ngrules demo",
    )
    parser.add_argument("--version", action="version", version=f"ngrules {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="build, differentiate, rewrite and execute an example graph",
        description="Build an example graph, differentiate it, and execute it.",
        epilog="example: ngrules demo",
    )
    demo.set_defaults(run=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:
        return args.run(args)
    except NgrulesError as e:
        print(f"ngrules: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
