"""The `ngrules` command line: one module per command in this folder, each with `register(sub)`.

Exit codes: 0 success, 1 findings (rule errors found by `check` or by any command that loads
rules, every one reported; a failed verification,
`fmt --check` differences), 2 usage or input errors (one located line on stderr, no traceback,
no output file), 130 interrupted by Ctrl-C or SIGTERM (one line on stderr; outputs are written
in transactions, so no file is left half-written; `verify` prints the verdicts computed so far).
The `ngrules` script (`command_line`) then ends the process at once (`exit_now`).
"""

from __future__ import annotations

import argparse
import os
import sys

from ngrules.cli.common import BAD_INPUT, INTERRUPTED
from ngrules.errors import NgrulesError, RuleErrors, printable
from ngrules.interrupts import (
    noticing_lost_interrupts,
    raise_if_interrupted,
    terminating_as_interrupts,
)
from ngrules.lang.shipped import short_location
from ngrules.version import __version__

#: The commands in the order `--help` lists them: (name, its module in this folder, whose
#: `register(sub)` adds its parser).
COMMANDS = (
    ("check", "check"),
    ("verify", "verify"),
    ("apply", "apply"),
    ("explain", "explain"),
    ("fmt", "fmt"),
    ("show", "show"),
    ("run", "run"),
    ("ops", "ops"),
    ("rules", "rules"),
    ("import", "importing"),
    ("export", "exporting"),
    ("coverage", "coverage"),
    ("demo", "demo"),
    ("lsp", "lsp"),
)


class _Parser(argparse.ArgumentParser):
    """argparse that exits with 2 and one line for usage errors (its own default is 2 too)."""

    def error(self, message: str):
        self.exit(BAD_INPUT, f"ngrules: error: {message} (see --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given the `command` the arguments name, only that one's
    (its module alone imported: parsing those arguments reads no other command's options,
    and building all 14 costs ~6 ms at every start)."""
    import importlib

    chosen = [m for name, m in COMMANDS if name == command] or [m for _, m in COMMANDS]
    parser = _Parser(
        prog="ngrules",
        description="Declarative rewrite rules for named-axes tensor graphs.",
        epilog="example: ngrules demo",
    )
    parser.add_argument("--version", action="version", version=f"ngrules {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in chosen:
        importlib.import_module(f"ngrules.cli.{module}").register(sub)
    return parser


def _one_line(e: NgrulesError) -> str:
    """The error as one line, even when its message quotes a library's several-line text."""
    where = f"{short_location(str(e.span))}: " if e.span is not None else ""
    message = " ".join(line.strip() for line in e.message.splitlines())
    return f"ngrules: {printable(where)}error: {printable(message)}"  # names from files


def main(argv: list[str] | None = None) -> int:
    with noticing_lost_interrupts(), terminating_as_interrupts():
        try:
            code = _main(argv)
            raise_if_interrupted()
            return code
        except KeyboardInterrupt:
            print("ngrules: interrupted", file=sys.stderr)
            return INTERRUPTED


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return BAD_INPUT
    try:
        return args.run(args)
    except BrokenPipeError:  # `ngrules demo | head`: the reader left; stop quietly
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so the final flush cannot fail
        return 0
    except RuleErrors as e:  # a rules file's check errors: all of them, exit 1, as `check`
        from ngrules.cli.check import report_errors

        return report_errors(e)
    except NgrulesError as e:
        print(_one_line(e), file=sys.stderr)
        return BAD_INPUT
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"ngrules: error: {printable(where)}{printable(e.strerror or e)}", file=sys.stderr)
        return BAD_INPUT
    except MemoryError:
        print("ngrules: error: out of memory", file=sys.stderr)
        return BAD_INPUT


def command_line() -> None:
    """The `ngrules` program: `main` on the process's arguments in a process set up for it
    (`as_program`), and the process ended with its exit code at once (`exit_now`)."""
    as_program()
    exit_now(main())


def as_program() -> None:
    """The settings of a process that runs one command and ends: the cyclic garbage collector
    looks at young objects every `GC_THRESHOLD` allocations rather than 700: a model's graph is
    hundreds of thousands of objects, nearly all alive until the end (collecting cost 48 ms of
    an apply to ResNet-50 at 700, 19 ms at 50,000, none at 200,000; its peak memory is
    unchanged). The `ngrules` script's process has them from its start (`ngrules.startup`)."""
    import gc

    from ngrules.startup import GC_THRESHOLD

    gc.set_threshold(GC_THRESHOLD)


def exit_now(code: int) -> None:
    """End the process with `code`, doing at once what others could see of Python's own exit:
    the `atexit` functions run, stdout and stderr flushed. Skipped: the interpreter's teardown,
    every module's objects freed one by one and extension modules' destructors, 100-150 ms of
    CPU after an apply to ResNet-50 (issue 34); the kernel frees the process's memory at once.
    A thread that is no daemon (Python waits for it) or a failing flush (Python reports it, exit
    code 120) leaves the exit to Python."""
    import atexit
    import threading

    main_thread = threading.main_thread()
    waited = [t for t in threading.enumerate() if t is not main_thread and not t.daemon]
    if not isinstance(code, int) or any(t.is_alive() for t in waited):
        sys.exit(code)
    atexit._run_exitfuncs()  # noqa: SLF001 - what the interpreter runs first at exit
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    command_line()
