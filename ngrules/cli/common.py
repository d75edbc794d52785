"""What every command shares: exit codes, how a command is declared, the default rules."""

from __future__ import annotations

import argparse
from collections.abc import Callable

FINDINGS, BAD_INPUT, INTERRUPTED = 1, 2, 130


def add_command(
    sub, name: str, run: Callable, help_: str, example: str, ops: str = "project"
) -> argparse.ArgumentParser:
    """One subcommand: its help doubles as description, its epilog shows an example.

    `ops` says which code that registers ops the command imports before it runs: "project"
    (the `ngrules.ops` entry points, `[tool.ngrules] ops`, and `--ops MODULE`), "explicit"
    (only `--ops`), "none" (nothing, and no `--ops` option: the command needs no ops)."""
    p = sub.add_parser(name, help=help_, description=help_, epilog=f"example: {example}")
    if ops == "none":
        p.set_defaults(run=run)
        return p
    project = ops == "project"
    also = ". [tool.ngrules] ops in pyproject.toml and `ngrules.ops` entry points load too"
    p.add_argument(
        "--ops",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a module (or .py file) that registers ops and functions, or load a .rules "
        "file for the ops it declares; repeatable" + (also if project else ""),
    )
    p.set_defaults(run=_with_ops(run, project))
    return p


def _with_ops(run: Callable, project: bool) -> Callable:
    def run_with_ops(args) -> int:
        from ngrules.config import import_ops_module, load_ops

        declaring = [m for m in args.ops if m.endswith(".rules")]
        modules = [m for m in args.ops if not m.endswith(".rules")]
        if project:
            load_ops(modules)
        else:
            for name in modules:
                import_ops_module(name)
        if declaring:
            from ngrules.lang.loader import load_rules

            load_rules(*declaring)
        return run(args)

    return run_with_ops


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `minimum` (a count, not a slice bound)."""

    def whole_number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    return whole_number


def rules_or_library(paths: list[str] | None, import_path: list[str] | None = None):
    """The rules in `paths`, or the shipped library when none are given."""
    from ngrules.lang.library import load_library
    from ngrules.lang.loader import load_rules

    return load_rules(*paths, search_path=import_path or ()) if paths else load_library()


def default_pipeline(rules, pipeline: str | None, passes=None) -> str | None:
    """The pipeline to run: the one named; else, when no passes are named, the rules' only
    pipeline, or `cpu` among several (with none of these, every pass runs): a file that
    declares one pipeline means it, not also the passes it left out."""
    if pipeline is not None or passes:
        return pipeline
    if len(rules.pipelines) == 1:
        return next(iter(rules.pipelines))
    return "cpu" if "cpu" in rules.pipelines else None


def add_import_path_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--import-path", action="append", default=[], metavar="DIR",
        help="a folder that `import` may read .rules files from besides the folders loaded "
        "(repeatable)",
    )


def add_rules_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", nargs="+", metavar="PATH", help="default: the shipped library")
    add_import_path_option(p)


def add_length_option(p: argparse.ArgumentParser) -> None:
    """`--length DIM=N` and `--max-constant-bytes` for commands that read ONNX models
    (`graphio.read_options` reads them)."""
    p.add_argument("--length", action="append", metavar="DIM=N",
                   help="the length of a symbolic ONNX dimension (repeatable)")
    p.add_argument("--max-constant-bytes", type=at_least(1), metavar="BYTES",
                   help="the largest constant an ONNX import may compute (default 256 MiB)")
    add_budget_options(p, "import", "an ONNX import: the model file, its external data, "
                       "the values it folds")


def add_budget_options(p: argparse.ArgumentParser, job: str, what: str) -> None:
    """`--JOB-memory` and `--JOB-seconds`: the budget of one whole import, export or rewrite
    (`ngrules.budget`; `graphio.budget_of` reads them)."""
    p.add_argument(f"--{job}-memory", type=byte_size, metavar="BYTES",
                   help=f"the memory budget of {what} (default 2G; K, M, G suffixes)")
    p.add_argument(f"--{job}-seconds", type=positive_seconds, metavar="S",
                   help=f"the time budget of each {job} (default 120)")


def byte_size(text: str) -> int:
    """An argparse type: a number of bytes, `2147483648` or `2G` (K, M, G, T: powers of 1024)."""
    scale = 1 << 10 * (" KMGT".index(text[-1].upper()) if text[-1:].upper() in "KMGT" else 0)
    number = text[:-1] if scale > 1 else text
    if not number.isdigit() or int(number) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of bytes")
    return int(number) * scale


def positive_seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def add_target_option(p: argparse.ArgumentParser) -> None:
    """`--target` and `--opset`: how an ONNX output is written (`graphio.stage_any`)."""
    p.add_argument("--target", choices=("onnx", "onnxruntime"), default="onnx",
                   help="an .onnx output in standard ONNX (default), or for onnxruntime: "
                        "chains joined into its com.microsoft ops (FusedConv, FusedGemm, "
                        "SkipLayerNormalization, BiasGelu, FastGelu, Gelu)")
    p.add_argument("--opset", type=int, choices=range(1, 29), default=None, metavar="1..28",
                   help="the ONNX opset of an .onnx output (default: the input model's; "
                        "below 17 each op in its form there, an error naming a node that has "
                        "none; Gelu from 20, Attention from 23)")
    add_budget_options(p, "export", "an ONNX export: the values it folds and writes")


def add_graph_argument(p: argparse.ArgumentParser) -> None:
    """The GRAPH a command reads, a graph file or an ONNX model, and `--length` for the model's
    symbolic dimensions (`graphio.load` reads both)."""
    p.add_argument("graph", metavar="GRAPH", help="a graph file (.json) or an ONNX model (.onnx)")
    add_length_option(p)


def load_graph_argument(args, symbolic: bool = False):
    """The graph `add_graph_argument` named: its outputs, and their names if it is an ONNX model.
    symbolic: an ONNX dimension given no `--length` keeps its symbol (for commands that only
    rewrite, and write ONNX back)."""
    from dataclasses import replace

    from ngrules.cli import graphio

    return graphio.load(args.graph, replace(graphio.read_options(args), symbolic=symbolic))


def add_disable_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--disable", action="append", default=[], metavar="RULE",
                   help="leave this rule out (repeatable)")


def without_rules(rules, names: list[str]):
    """`--disable`: the rule set less the rules named (`RuleSet.without`)."""
    from ngrules.errors import NgrulesError

    try:
        return rules.without(names)
    except NgrulesError as e:
        raise NgrulesError(f"--disable: {e.message}") from None
