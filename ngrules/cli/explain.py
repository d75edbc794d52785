"""`ngrules explain RULE GRAPH`: why a rule does not match, in the rule's own terms;
`ngrules explain --saturate GRAPH`: which chains of rules made each changed region of the
graph equality saturation extracts (nothing is written but the `--egraph` picture)."""

from __future__ import annotations

import argparse

from ngrules.cli.common import (
    add_command,
    add_graph_argument,
    add_rules_option,
    at_least,
    default_pipeline,
    load_graph_argument,
    positive_seconds,
    rules_or_library,
)
from ngrules.cli.saturating import add_saturate_options, check_saturate_options
from ngrules.errors import NgrulesError


def run(args) -> int:
    if args.saturate:
        return _saturated(args)
    if args.pipeline is not None or args.passes is not None:
        raise NgrulesError("--pipeline, --passes: only meaningful with --saturate")
    if args.rule is None:
        raise NgrulesError("explain needs a RULE (or --saturate to explain a saturation)")
    from ngrules.engine.explain import explain

    check_saturate_options(args)
    rules = rules_or_library(args.rules, args.import_path)
    rule = rules.rule(args.rule)
    outputs = load_graph_argument(args, symbolic=True)[0]  # may use its ops; dims may be symbolic
    print(explain(rule, outputs, limit=args.limit, read_by=rules.passes.get(rule.pass_name)))
    return 0


def _saturated(args) -> int:
    """Saturate as `apply --saturate --explain` does, print the report and the changed regions,
    write no graph."""
    from ngrules.cli.saturating import run_saturation

    if args.rule is not None:
        raise NgrulesError(f"explain --saturate takes a GRAPH only, not a rule ({args.rule!r})")
    if args.egraph is not None:  # before any work: never an input, never a folder
        from ngrules.cli import graphio
        from ngrules.cli.picture import picture_files
        from ngrules.ir.fileio import check_outputs

        check_outputs(picture_files(args.egraph), graphio.files(args.graph))
    rules = rules_or_library(args.rules, args.import_path)
    outputs = load_graph_argument(args, symbolic=True)[0]
    pipeline = default_pipeline(rules, args.pipeline, args.passes)
    options = argparse.Namespace(**{**vars(args), "explain": True, "fold_limit": None,
                                    "trace": False})
    _, stopped, code, egraph = run_saturation(outputs, rules, pipeline, options)
    if egraph is not None:
        from ngrules.cli.picture import picture_line, stage_picture
        from ngrules.ir.fileio import staged_files

        with staged_files() as stage:
            stage_picture(stage, egraph, args.egraph)
        print("e-graph " + picture_line(egraph, args.egraph))
    print(stopped)
    return code


def register(sub) -> None:
    p = add_command(
        sub,
        "explain",
        run,
        "say why a rule does not match a graph, or (--saturate) what saturation changed",
        "ngrules explain batchnorm_bprop g.json --rules rules/\n"
        "         ngrules explain --saturate g.json --rules rules/ --pipeline cpu",
    )
    p.add_argument("rule", metavar="RULE", nargs="?",
                   help="the rule to explain (not with --saturate)")
    add_graph_argument(p)
    add_rules_option(p)
    p.add_argument("--limit", type=at_least(0), default=3,
                   help="closest misses to show (default 3)")
    p.add_argument("--pipeline", metavar="NAME",
                   help="with --saturate: the pipeline saturated (default as for apply)")
    p.add_argument("--passes", nargs="+", metavar="PASS",
                   help="with --saturate: these passes instead")
    p.add_argument("--picture-timeout", type=positive_seconds, default=60.0, metavar="SECONDS",
                   help="with --egraph: how long Graphviz may draw (default 60)")
    add_saturate_options(p)
