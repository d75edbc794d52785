"""`apply --saturate`: the rules applied into an e-graph, the cheapest graph extracted
(`ngrules.saturation`), and what happened printed: the rules left out and why, how often each
rule changed the e-graph, the e-graph's size, the extraction and the rules behind its nodes."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from ngrules.cli.common import FINDINGS, positive_seconds
from ngrules.errors import printable


def add_saturate_options(p: argparse.ArgumentParser) -> None:
    from ngrules.saturation import ITERATIONS, MAX_ENODES, SECONDS

    g = p.add_argument_group("equality saturation (--saturate)")
    for flag, help_ in _SWITCHES:
        g.add_argument(flag, action="store_true", help=help_)
    g.add_argument("--max-enodes", type=_positive, default=MAX_ENODES, metavar="N",
                   help=f"stop saturating at N e-nodes (default {MAX_ENODES})")
    g.add_argument("--max-iterations", type=_positive, default=None, metavar="N",
                   help=f"stop saturating after N iterations (default {ITERATIONS})")
    g.add_argument("--saturate-seconds", type=positive_seconds, default=SECONDS, metavar="S",
                   help=f"stop saturating after S seconds (default {SECONDS:g})")
    g.add_argument("--egraph", metavar="DOT",
                   help="with --saturate: draw the e-graph (up to 300 e-nodes) as Graphviz DOT "
                        "(and SVG), the chosen e-nodes filled")
    g.add_argument("--extract", choices=("auto", "z3", "greedy"), default="auto",
                   help="extraction: z3 (exact, shared nodes counted once) on small e-graphs "
                        "with a greedy fallback (auto, the default), always z3, or greedy")


#: The on/off options of saturation and their help.
_SWITCHES = (
    ("--saturate", "apply the rules into an e-graph and extract the cheapest graph, instead of "
                   "rewriting greedily (only verified or proved rules enter)"),
    ("--unverified", "with --saturate: let rules without a verified or proved verdict in (they "
                     "are named in a warning), and verify nothing"),
    ("--explain", "with --saturate: each changed region of the result and the rules that led "
                  "there, in the order they were applied"),
)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


#: The options that mean something only with --saturate, and their defaults.
_ONLY_WITH_SATURATE = {"unverified": False, "explain": False, "egraph": None,
                       "max_iterations": None, "extract": "auto"}


def check_saturate_options(args) -> None:
    """A saturation option without --saturate is a mistake, not something to ignore."""
    from ngrules.errors import NgrulesError
    from ngrules.saturation import MAX_ENODES, SECONDS

    if args.saturate:
        return
    defaults = {**_ONLY_WITH_SATURATE, "max_enodes": MAX_ENODES, "saturate_seconds": SECONDS}
    given = [k for k, default in defaults.items() if getattr(args, k) != default]
    if given:
        names = ", ".join("--" + k.replace("_", "-") for k in given)
        raise NgrulesError(f"{names}: only meaningful with --saturate")


def run_saturation(outputs, rules, pipeline, args) -> tuple[list, str, int, object]:
    """Saturate and print the report; (the extracted outputs, the `stopped:` line, exit code:
    0 when saturated, FINDINGS when a limit stopped it, the e-graph's picture or None)."""
    from ngrules.cli import graphio
    from ngrules.lang.library import short_location
    from ngrules.saturation.run import ITERATIONS, saturate

    use_z3 = {"auto": None, "z3": True, "greedy": False}[args.extract]
    options = {}
    if not args.unverified:
        print("saturate: verifying the rules that have no verdict yet (each on its own; "
              "--unverified skips this)", file=sys.stderr)
        options = {"on_rule": _progress}
        # as `verify` judges: the same draws every run, so verdicts are kept in the
        # verdict cache for the next run
        from hypothesis import settings

        from ngrules.verification.profiles import register_profiles

        register_profiles()
        settings.load_profile("ci")
    result = saturate(
        outputs, rules, pipeline=pipeline, passes=args.passes or None,
        max_enodes=args.max_enodes, seconds=args.saturate_seconds,
        iterations=args.max_iterations or ITERATIONS, unverified=args.unverified,
        use_z3=use_z3, fold_limit=args.fold_limit, budget=graphio.budget_of(args, "rewrite"),
        **options,
    )
    for warning in result.warnings:
        print(warning, file=sys.stderr)
    for rule, why in result.admission.left_out:
        print(f"left out     {rule.name:24s} {short_location(rule.location)}: {why}")
    locations = {r.name: short_location(r.location) for r in result.admission.rules}
    for name, count in result.applied.items():
        print(f"applied {count:5d}  {name:24s} {locations.get(name, '(built-in)')}")
    print(f"e-graph: {result.enodes} e-nodes in {result.classes} classes after "
          f"{result.iterations} iterations, {result.seconds:.2f} s")
    ex = result.extraction
    print(f"extracted by {ex.method} ({ex.note}): cost {result.cost_before:g} -> "
          f"{result.cost_after:g}")
    made = Counter(getattr(r, "name", r) for r in result.provenance.values())
    if made:
        print("nodes made by rules: " + ", ".join(f"{n} {c}" for n, c in made.items()))
    if args.trace:
        _print_provenance(result)
    if args.explain:
        from ngrules.saturation.explain import regions

        for region in regions(result, list(outputs)):
            for line in f"changed: {region}".split("\n"):
                print(printable(line))  # axis names may be a model's
    code = 0 if result.stop == "saturated" else FINDINGS
    stopped = f"stopped: {result.stop} ({result.message})"
    return result.outputs, stopped, code, _egraph_picture(result, args)


def _egraph_picture(result, args):
    """The picture of the e-graph `--egraph` asks for (None when it does not)."""
    if args.egraph is None:
        return None
    from pathlib import Path

    from ngrules.cli.picture import Picture, draw_svg
    from ngrules.saturation.explain import egraph_dot

    text = egraph_dot(result, Path(args.egraph).stem)
    return Picture(text, *draw_svg(text, args.picture_timeout))


def _progress(i: int, n: int, rule) -> None:
    print(f"saturate: verifying {i}/{n} {rule.name}", file=sys.stderr, flush=True)


def _print_provenance(result) -> None:
    """Each node of the extracted graph that a rule made, with that rule and where it is."""
    from ngrules.ir.graph import toposort
    from ngrules.lang.library import short_location

    for i, node in enumerate(toposort(result.outputs)):
        rule = result.provenance.get(node)
        if rule is not None:
            where = short_location(rule.location) if hasattr(rule, "location") else "built-in"
            name = getattr(rule, "name", rule)
            line = f"{i:5d}  {node.op:20s} {node.axes!r:28s} <- {name} ({where})"
            print(printable(line))  # axis names may be a model's
