"""`ngrules apply GRAPH -o OUT`: rewrite a graph file, with trace, statistics and a picture."""

from __future__ import annotations

from pathlib import Path

from ngrules.cli.common import FINDINGS, add_command, add_rules_option, rules_or_library


def run(args) -> int:
    from ngrules.engine.driver import rewrite
    from ngrules.ir.graphfile import load_graph, save_graph

    outputs = load_graph(args.graph)
    rules = rules_or_library(args.rules)
    pipeline = args.pipeline if args.pipeline or not args.passes else None
    if pipeline is None and not args.passes and "cpu" in rules.pipelines:
        pipeline = "cpu"
    result = rewrite(
        outputs, rules, pipeline=pipeline, passes=args.passes or None, stats=args.stats
    )
    save_graph(args.output, result.outputs)
    if args.picture:
        _picture(result.outputs, args.picture)
    _print_firings(result, args.trace)
    if args.stats:
        _print_stats(result)
    print(f"stopped: {result.stop}" + (f" ({result.message})" if result.message else ""))
    return 0 if result.stop == "fixpoint" else FINDINGS


def _picture(outputs, path: str) -> None:
    from ngrules.cli.picture import write_picture

    svg = write_picture(outputs, path, title=Path(path).stem)
    print(f"picture: {svg or path}" + ("" if svg else " (install Graphviz to render SVG)"))


def _print_firings(result, trace: bool) -> None:
    if trace:
        for i, f in enumerate(result.trace):
            print(
                f"{i:5d}  {f.rule:24s} {f.location:28s} {f.root.op} -> "
                f"{', '.join(r.op for r in f.replacements)}"
            )
    from ngrules.lang.library import short_location

    locations = {f.rule: short_location(f.location) for f in result.trace}
    for name, count in result.fired().items():
        print(f"fired {count:6d}  {name:24s} {locations[name]}")


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
    p.add_argument("graph", metavar="GRAPH")
    p.add_argument("-o", "--output", required=True, metavar="OUT")
    add_rules_option(p)
    p.add_argument("--pipeline", metavar="NAME", help="default: cpu when the rules define it")
    p.add_argument("--passes", nargs="+", metavar="PASS", help="run these passes instead")
    p.add_argument("--trace", action="store_true", help="print every rewrite")
    p.add_argument("--stats", action="store_true", help="print per-rule statistics")
    p.add_argument("--picture", metavar="DOT",
                   help="write the result as Graphviz DOT (and SVG when Graphviz is installed), "
                        "rewritten nodes coloured by rule")
