"""`ngrules apply GRAPH -o OUT`: rewrite a graph file, with trace, statistics and a picture.

Every output (the graph's two files, the picture's DOT and SVG) is checked before anything is
read or rewritten: none may be a folder, be in a missing folder, be another output, or be an
input (the graph's files or a rules file). All are then written in one transaction.
GRAPH and OUT are ngrules graph files, or ONNX models when they end in `.onnx`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from ngrules.cli.common import (
    FINDINGS,
    add_budget_options,
    add_command,
    add_disable_option,
    add_graph_argument,
    add_rules_option,
    add_target_option,
    default_pipeline,
    positive_seconds,
    rules_or_library,
    without_rules,
)
from ngrules.cli.saturating import add_saturate_options, check_saturate_options
from ngrules.errors import printable


def _check_paths(args) -> None:
    from ngrules.cli import graphio
    from ngrules.ir.fileio import check_outputs
    from ngrules.lang.loader import expand_paths

    outputs = graphio.output_files(args.output)
    for picture in (args.picture, args.egraph):
        if picture is not None:  # the pictures' module (and subprocess) only when drawn
            from ngrules.cli.picture import picture_files

            outputs += picture_files(picture)
    inputs = [*graphio.files(args.graph), *expand_paths(args.rules or [])]
    check_outputs(outputs, inputs)
    graphio.check_graph_output(args.output)
    graphio.check_target(args.output, args.target, args.opset)


def run(args) -> int:
    from ngrules.cli import graphio
    from ngrules.ir.fileio import staged_files

    check_saturate_options(args)
    _check_no_rules(args)
    _check_paths(args)
    # the model's file read on a thread while the rules load (and onnx, the importer)
    with graphio.reading_ahead(args.graph, graphio.budget_of(args, "import")):
        rules = None if args.no_rules else \
            without_rules(rules_or_library(args.rules, args.import_path), args.disable)
        # ONNX in and out: a dimension given no --length stays symbolic (a dynamic batch)
        symbolic = graphio.is_onnx(args.graph) and graphio.is_onnx(args.output)
        outputs, names, opset, spendable = graphio.load_spendable(  # may use its ops
            args.graph, replace(graphio.read_options(args), symbolic=symbolic))
    opset = graphio.written_opset(args.opset, opset)
    pipeline = None if rules is None else default_pipeline(rules, args.pipeline, args.passes)
    if rules is None:  # the round trip: the graph written back as read
        new, stopped, code, egraph = outputs, "stopped: no rules (--no-rules)", 0, None
    elif args.saturate:
        from ngrules.cli.saturating import run_saturation
        from ngrules.engine.passes import pass_names

        if not args.quiet:
            names_run = pass_names(rules, pipeline, args.passes or None)
            line = _passes_line(pipeline, args.pipeline, names_run)
            print(f"{line} (saturated together)", file=sys.stderr)
        new, stopped, code, egraph = run_saturation(outputs, rules, pipeline, args)
    else:  # the graph read is not read again: its file's bytes are the rewrite's to spend,
        # unless the trace shows what the rules matched (weights folded over would show)
        spend = None if args.trace else spendable
        (new, stopped, code), egraph = _rewrite(outputs, rules, pipeline, args, spend), None
    del outputs, spendable  # only the result is read from here on
    sys.stdout.flush()
    pictures = _pictures(args, new, egraph)
    with staged_files() as stage:
        graphio.stage_any(stage, args.output, new, names, args.target, opset,
                          graphio.budget_of(args, "export"))
        for stage_it, _ in pictures:
            stage_it(stage)
    for _, line in pictures:
        print(line)
    print(stopped)
    return code


def _pictures(args, new, egraph) -> list:
    """(stage it, the line said once written) for each picture asked for: the rewritten
    graph's (`--picture`, drawn here), the e-graph's (`--egraph`). The pictures' module (and
    subprocess) is imported only then."""
    if args.picture is None and egraph is None:
        return []
    from functools import partial

    from ngrules.cli.picture import draw, picture_line, stage_picture

    drawn = [] if args.picture is None else \
        [("", draw(new, Path(args.picture).stem, timeout=args.picture_timeout), args.picture)]
    drawn += [] if egraph is None else [("e-graph ", egraph, args.egraph)]
    return [(partial(stage_picture, picture=picture, path_dot=path),
             label + picture_line(picture, path)) for label, picture, path in drawn]


#: the options that name rules or steer the rewrite: none is meaningful with --no-rules
#: (a saturation option is already refused without --saturate).
_REWRITE_OPTIONS = ("rules", "pipeline", "passes", "disable", "saturate", "import_path",
                    "trace", "stats", "fold_limit", "rewrite_memory", "rewrite_seconds")


def _check_no_rules(args) -> None:
    """`--no-rules` with an option that names rules or how to run them is a mistake."""
    from ngrules.errors import NgrulesError

    if not args.no_rules:
        return
    given = ["--" + k.replace("_", "-") for k in _REWRITE_OPTIONS
             if _given(getattr(args, k))]
    if given:
        raise NgrulesError(f"--no-rules writes the graph back with no rewrite: it takes no "
                           f"{', '.join(given)}")


def _given(value) -> bool:
    """Whether an option was given: not its default (None, False or []; `--fold-limit 0`
    is given, so not `value in (None, False)`, which 0 equals)."""
    return value is not None and value is not False and value != []


def _rewrite(outputs, rules, pipeline, args, spend=None) -> tuple[list, str, int]:
    """A greedy rewrite, its passes, firings (and trace, statistics) printed; `spend`: the
    model file's bytes, when nothing reads the graph read again (`rewrite`)."""
    from ngrules.cli import graphio
    from ngrules.engine.driver import rewrite

    result = rewrite(
        outputs, rules, pipeline=pipeline, passes=args.passes or None, stats=args.stats,
        fold_limit=args.fold_limit, budget=graphio.budget_of(args, "rewrite"), spend=spend,
    )
    if not args.quiet:
        print(_passes_line(pipeline, args.pipeline, result.passes), file=sys.stderr)
    for warning in result.warnings:  # matches rejected because an expression failed there
        print(printable(warning), file=sys.stderr)
    _print_firings(result, args.trace, rules, args.picture is not None)  # first: shown even
    # when writing fails (with --picture, the trace built as before: see _print_firings)
    if result.folded:
        print(f"folded {len(result.folded):5d}  constant computations (fold_constants)")
    if args.stats:
        _print_stats(result)
    stopped = f"stopped: {result.stop}" + (f" ({result.message})" if result.message else "")
    return result.outputs, stopped, 0 if result.stop == "fixpoint" else FINDINGS


def _passes_line(pipeline: str | None, named: str | None, passes: list[str]) -> str:
    """`pipeline cpu (default): passes a, b`: which passes the rewrite ran, and why those."""
    if pipeline is None:
        return f"passes: {', '.join(passes) or 'none'} (no pipeline)"
    why = "" if named is not None else " (default)"
    return f"pipeline {pipeline}{why}: passes {', '.join(passes)}"


def _print_firings(result, trace: bool, rules, picture: bool = False) -> None:
    from ngrules.lang.library import short_location

    if trace:
        _print_trace(result, rules)

    # the trace (its pending roots rebuilt) only when --trace or --picture reads it: a root
    # rebuilt into a node of the graph gives it its origin, which the picture colours
    locations = {f.rule: f.location for f in result.trace} if trace or picture \
        else result.locations()
    locations = {rule: short_location(where) for rule, where in locations.items()}  # each once
    for name, count in result.fired().items():
        print(f"fired {count:6d}  {name:24s} {locations[name]}")


def _print_trace(result, rules) -> None:
    """Each rewrite, and under it what each variable of the rule matched."""
    from ngrules.engine.bindings import format_bindings, match_bindings
    from ngrules.lang.library import short_location

    by_name = {r.name: r for r in rules.rules}
    for i, f in enumerate(result.trace):
        print(
            f"{i:5d}  {f.rule:24s} {short_location(f.location):28s} {f.root.op} -> "
            f"{', '.join(r.op for r in f.replacements)}"
        )
        bound = match_bindings(by_name[f.rule], f.roots) if f.rule in by_name else None
        if bound:
            print(f"{'':7s}{printable(format_bindings(bound))}")  # a model's names


def _print_stats(result) -> None:
    print(f"{'rule':24s} {'attempts':>9s} {'matches':>8s} {'ms':>8s}")
    for name, s in sorted(result.stats.items(), key=lambda kv: -kv[1].seconds):
        print(f"{name:24s} {s.attempts:9d} {s.matches:8d} {s.seconds * 1e3:8.2f}")


def register(sub) -> None:
    p = add_command(
        sub,
        "apply",
        run,
        "rewrite a graph file with rules",
        "ngrules apply g.json -o out.json --pipeline cpu --trace",
    )
    add_graph_argument(p)
    p.add_argument("-o", "--output", required=True, metavar="OUT")
    add_rules_option(p)
    add_disable_option(p)
    p.add_argument("--pipeline", metavar="NAME",
                   help="default: the rules' only pipeline, or cpu among several; with "
                        "neither, every pass (the passes run are printed on stderr)")
    p.add_argument("--passes", nargs="+", metavar="PASS", help="run these passes instead")
    p.add_argument("--no-rules", action="store_true",
                   help="no rewrite: the graph written back as read (an ONNX model comes back "
                        "as itself, at its opset)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="do not print the pipeline and passes run (stderr)")
    p.add_argument("--fold-limit", type=_elements, default=None, metavar="N",
                   help="the most elements one value folded by the built-in pass "
                        "fold_constants may have (default 16777216)")
    add_budget_options(p, "rewrite", "the rewrite (or saturation): the nodes its rules "
                       "build, the values it folds")
    add_target_option(p)
    p.add_argument("--trace", action="store_true", help="print every rewrite")
    p.add_argument("--stats", action="store_true", help="print per-rule statistics")
    p.add_argument("--picture", metavar="DOT",
                   help="write the result as Graphviz DOT (and SVG when Graphviz is installed), "
                        "rewritten nodes coloured by rule")
    p.add_argument("--picture-timeout", type=positive_seconds, default=60.0, metavar="SECONDS",
                   help="how long Graphviz may draw before only the DOT file is kept "
                        "(default 60)")
    add_saturate_options(p)


def _elements(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a number of elements, got {text!r}")
    return int(text)
