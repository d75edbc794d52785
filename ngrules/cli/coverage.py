"""`ngrules coverage RULES MODEL...`: per rule, how often it fired on each model and where it
came closest to matching when it did not: the table that says whether a rule earns its place.

Models are ONNX files (`.onnx`, the `onnx` extra) or ngrules graph files. Each is rewritten
with the rules (the pipeline `apply` would run: the rules' only one, or `cpu` among several,
else every pass); near misses are `explain`'s closest partial matches on the model as it was
read, its composite ONNX ops lowered into their primitives when the passes run lower them
(what the rules read after `decompose`; with no such pass the rules read the ops whole, as
`apply` gives them). A rule whose pass is not in the pipeline that ran is marked so (it could
not fire). A model that cannot be read gets its
reason on its row; the others are still counted, and the command exits 1.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ngrules.cli.common import (
    add_command,
    add_import_path_option,
    add_length_option,
    at_least,
    default_pipeline,
    rules_or_library,
)
from ngrules.errors import printable


def coverage(rules, models: dict[str, list], pipeline: str | None, misses: int) -> dict:
    """{"models": {name: {"nodes": n, "stop": ...}}, "rules": [{"rule", "location", "fired",
    "near_misses"}]} for the given rules and {model name: outputs}."""
    from ngrules.engine.driver import rewrite
    from ngrules.engine.explain import explain
    from ngrules.engine.passes import pass_names
    from ngrules.ir.composite import decompose, pass_ops
    from ngrules.ir.graph import toposort
    from ngrules.lang.shipped import short_location

    pipeline = default_pipeline(rules, pipeline)
    ran = set(rules.pipelines[pipeline]) if pipeline in rules.pipelines else None
    table = {"models": {}, "rules": [], "pipeline": pipeline}
    lowers = any(pass_ops(p) is not False for p in pass_names(rules, pipeline, None)
                 if p not in rules.passes)
    fired, seen = {}, {}
    for name, outputs in models.items():
        result = rewrite(outputs, rules, pipeline=pipeline)
        fired[name] = result.fired()
        seen[name] = decompose(outputs, record=False) if lowers else list(outputs)
        table["models"][name] = {
            "nodes_before": len(toposort(seen[name])),
            "nodes_after": len(toposort(result.outputs)),
            "stop": result.stop,
        }
    for rule in rules:
        row = {"rule": rule.name, "location": rule.location, "fired": {}, "near_misses": {},
               "in_pipeline": ran is None or rule.pass_name in ran}
        for name in models:
            row["fired"][name] = fired[name].get(rule.name, 0)
            if misses and not row["fired"][name] and row["in_pipeline"]:
                found = explain(rule, seen[name], limit=misses,
                                read_by=rules.passes.get(rule.pass_name))
                row["near_misses"][name] = [
                    {"at": found.names.get(m.root, m.root.op), "element": m.text,
                     "where": short_location(str(m.span)) if m.span else None,
                     "found": m.found}
                    for m in found.misses
                ]
        table["rules"].append(row)
    return table


def _print(table: dict, failed: dict[str, str]) -> None:
    names = list(table["models"])
    width = max([len(r["rule"]) for r in table["rules"]] + [4])
    print(f"{'rule':{width}s}  " + "  ".join(f"{Path(n).name:>12s}" for n in names))
    for row in table["rules"]:
        if not row["in_pipeline"]:
            print(f"{row['rule']:{width}s}  not in pipeline {table['pipeline']} (its pass "
                  "did not run)")
            continue
        counts = "  ".join(f"{row['fired'][n]:12d}" for n in names)
        print(f"{row['rule']:{width}s}  {counts}")
        for n, misses in row["near_misses"].items():
            for m in misses[:1]:
                print(printable(f"{'':{width}s}    closest on {Path(n).name}: `{m['element']}`"
                                + (f" at {m['where']}" if m["where"] else "")
                                + f": {m['found']}"))
    for n, info in table["models"].items():
        print(f"{n}: {info['nodes_before']} -> {info['nodes_after']} nodes ({info['stop']})")
    for n, reason in failed.items():
        print(printable(f"{n}: not read: {reason}"))


def _read(paths, options) -> tuple[dict[str, list], dict[str, str]]:
    """The models that could be read, and the reason for each of the others."""
    from ngrules.cli import graphio
    from ngrules.errors import NgrulesError

    models, failed = {}, {}
    for path, own in graphio.options_per_model(paths, options).items():
        try:  # a dimension given no --length stays symbolic, as `apply` keeps it: only rewritten
            models[path] = graphio.load(path, replace(own, symbolic=True))[0]
        except NgrulesError as e:
            failed[path] = " ".join(e.message.split())
        except OSError as e:
            failed[path] = e.strerror or str(e)
    return models, failed


def run(args) -> int:
    from ngrules.cli import graphio

    rules = rules_or_library([args.rules], args.import_path)
    models, failed = _read(args.models, graphio.read_options(args))
    table = coverage(rules, models, args.pipeline, args.misses)
    table["not_read"] = failed
    if args.json:
        print(json.dumps(table, indent=2))
    else:
        _print(table, failed)
    return 1 if failed else 0


def register(sub) -> None:
    p = add_command(
        sub,
        "coverage",
        run,
        "how often each rule fires on each model, and its near misses where it does not",
        "ngrules coverage rules/ model.onnx other.onnx --json",
    )
    p.add_argument("rules", metavar="RULES")
    p.add_argument("models", nargs="+", metavar="MODEL")
    add_import_path_option(p)
    p.add_argument("--pipeline", metavar="NAME",
                   help="default: the rules' only pipeline, or cpu among several")
    p.add_argument("--misses", type=at_least(0), default=1, help="near misses per rule and model")
    add_length_option(p)
    p.add_argument("--json", action="store_true", help="print the table as JSON")
