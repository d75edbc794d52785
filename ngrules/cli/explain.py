"""`ngrules explain RULE GRAPH`: why a rule does not match, in the rule's own terms."""

from __future__ import annotations

from ngrules.cli.common import (
    add_command,
    add_graph_argument,
    add_rules_option,
    at_least,
    load_graph_argument,
    rules_or_library,
)


def run(args) -> int:
    from ngrules.engine.explain import explain

    rules = rules_or_library(args.rules, args.import_path)
    rule = rules.rule(args.rule)
    outputs = load_graph_argument(args, symbolic=True)[0]  # may use its ops; dims may be symbolic
    print(explain(rule, outputs, limit=args.limit, read_by=rules.passes.get(rule.pass_name)))
    return 0


def register(sub) -> None:
    p = add_command(
        sub,
        "explain",
        run,
        "say why a rule does not match a graph",
        "ngrules explain batchnorm_bprop g.json --rules rules/",
    )
    p.add_argument("rule", metavar="RULE")
    add_graph_argument(p)
    add_rules_option(p)
    p.add_argument("--limit", type=at_least(0), default=3,
                   help="closest misses to show (default 3)")
