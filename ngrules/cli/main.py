"""The `ngrules` command line: check, verify, apply, explain, fmt and demo.

Exit codes: 0 success, 1 findings (rule errors found by `check`, a failed verification,
`fmt --check` differences), 2 usage or input errors (one located line on stderr, no traceback,
no output file).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from ngrules.errors import NgrulesError, RuleErrors
from ngrules.version import __version__

FINDINGS, BAD_INPUT = 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that exits with 2 and one line for usage errors (its own default is 2 too)."""

    def error(self, message: str):
        self.exit(BAD_INPUT, f"ngrules: error: {message} (see --help)\n")


def _rules_or_library(paths: list[str] | None):
    from ngrules.lang.library import load_library
    from ngrules.lang.loader import load_rules

    return load_rules(*paths) if paths else load_library()


# -- commands --------------------------------------------------------------------------------
def cmd_check(args) -> int:
    from ngrules.lang.loader import load_rules

    try:
        rules = load_rules(*args.paths)
    except RuleErrors as e:
        print(str(e), file=sys.stderr)
        print(f"{len(e.errors)} error(s)", file=sys.stderr)
        return FINDINGS
    print(f"ok: {len(rules)} rules in {len(rules.passes)} passes, {len(rules.pipelines)} pipelines")
    return 0


def cmd_apply(args) -> int:
    from ngrules.engine.driver import rewrite
    from ngrules.ir.graphfile import load_graph, save_graph

    outputs = load_graph(args.graph)
    rules = _rules_or_library(args.rules)
    pipeline = args.pipeline if args.pipeline or not args.passes else None
    if pipeline is None and not args.passes and "cpu" in rules.pipelines:
        pipeline = "cpu"
    result = rewrite(outputs, rules, pipeline=pipeline, passes=args.passes or None)
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


def cmd_explain(args) -> int:
    from ngrules.engine.explain import explain
    from ngrules.ir.graphfile import load_graph

    outputs = load_graph(args.graph)
    rule = _rules_or_library(args.rules).rule(args.rule)
    print(explain(rule, outputs, limit=args.limit))
    return 0


def cmd_fmt(args) -> int:
    from ngrules.ir.graphfile import staged_files
    from ngrules.lang.layout import format_rules
    from ngrules.lang.loader import expand_paths
    from ngrules.lang.parser import parse

    changed = []
    for path in expand_paths(args.paths):
        text = Path(path).read_text(encoding="utf-8")
        formatted = format_rules(parse(text, path))
        if formatted != text:
            changed.append((path, formatted))
    if args.check:
        for path, _ in changed:
            print(f"would reformat {path}")
        return FINDINGS if changed else 0
    with staged_files() as stage:
        for path, formatted in changed:
            stage(path, lambda f, t=formatted: f.write(t), text=True)
    for path, _ in changed:
        print(f"reformatted {path}")
    return 0


def cmd_verify(args) -> int:
    from hypothesis import settings

    from ngrules.verification.profiles import register_profiles
    from ngrules.verification.verify import verify

    register_profiles()
    settings.load_profile("ci")  # derandomized: the same verdicts on every run
    report = verify(_rules_or_library(args.paths), examples=args.examples, on_rule=_progress)
    print(file=sys.stderr)
    print(report)
    return 0 if report.ok else FINDINGS


def _progress(i: int, n: int, rule) -> None:
    """A one-line progress bar on stderr, redrawn in place."""
    done = 30 * (i - 1) // n
    bar = "#" * done + "-" * (30 - done)
    print(f"\r[{bar}] {i}/{n} {rule.name:32.32s}", end="", file=sys.stderr, flush=True)


def cmd_demo(args) -> int:
    from ngrules.cli.demo import run_demo

    return run_demo(args)


# -- the parser ------------------------------------------------------------------------------
def _command(sub, name: str, run: Callable, help_: str, example: str):
    p = sub.add_parser(name, help=help_, description=help_, epilog=f"example: {example}")
    p.set_defaults(run=run)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ngrules",
        description="Declarative rewrite rules for named-axes tensor graphs.",
        epilog="example: ngrules demo",
    )
    parser.add_argument("--version", action="version", version=f"ngrules {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    p = _command(
        sub, "check", cmd_check, "load and check rules files or folders", "ngrules check rules/"
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    p = _command(
        sub,
        "verify",
        cmd_verify,
        "verify every rule numerically on its own instances",
        "ngrules verify rules/ --examples 50",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="default: the shipped library")
    p.add_argument("--examples", type=int, default=None,
                   help="instances each rule must fire on (default: 40, hypothesis's ci profile)")
    p = _command(
        sub,
        "apply",
        cmd_apply,
        "rewrite a graph file with rules",
        "ngrules apply g.json -o out.json --pipeline cpu --trace",
    )
    p.add_argument("graph", metavar="GRAPH")
    p.add_argument("-o", "--output", required=True, metavar="OUT")
    p.add_argument("--rules", nargs="+", metavar="PATH", help="default: the shipped library")
    p.add_argument("--pipeline", metavar="NAME", help="default: cpu when the rules define it")
    p.add_argument("--passes", nargs="+", metavar="PASS", help="run these passes instead")
    p.add_argument("--trace", action="store_true", help="print every rewrite")
    p.add_argument("--stats", action="store_true", help="print per-rule statistics")
    p.add_argument("--picture", metavar="DOT",
                   help="write the result as Graphviz DOT (and SVG when Graphviz is installed), "
                        "rewritten nodes coloured by rule")
    p = _command(
        sub,
        "explain",
        cmd_explain,
        "say why a rule does not match a graph",
        "ngrules explain batchnorm_bprop g.json --rules rules/",
    )
    p.add_argument("rule", metavar="RULE")
    p.add_argument("graph", metavar="GRAPH")
    p.add_argument("--rules", nargs="+", metavar="PATH", help="default: the shipped library")
    p.add_argument("--limit", type=int, default=3, help="closest misses to show (default 3)")
    p = _command(
        sub, "fmt", cmd_fmt, "format rules files canonically", "ngrules fmt rules/ --check"
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--check", action="store_true", help="only report files that would change")
    p = _command(
        sub,
        "demo",
        cmd_demo,
        "the main job on an example: an MLP with batchnorm and "
        "relu, differentiated, rewritten by the cpu pipeline, executed before and after",
        "ngrules demo --out demo-out",
    )
    p.add_argument("--out", default="ngrules-demo", help="folder for the pictures")
    return parser


def _one_line(e: NgrulesError) -> str:
    where = f"{e.span}: " if e.span is not None else ""
    return f"ngrules: {where}error: {e.message}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return BAD_INPUT
    try:
        return args.run(args)
    except BrokenPipeError:  # `ngrules demo | head`: the reader left; stop quietly
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so the final flush cannot fail
        return 0
    except NgrulesError as e:
        print(_one_line(e), file=sys.stderr)
        return BAD_INPUT
    except OSError as e:
        print(f"ngrules: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
