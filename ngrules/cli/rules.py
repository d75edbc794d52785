"""`ngrules rules [PATH...]`: the rules, passes and pipelines of files, with their locations."""

from __future__ import annotations

from ngrules.cli.common import add_command, add_import_path_option, rules_or_library


def run(args) -> int:
    from ngrules.lang.library import short_location

    rules = rules_or_library(args.paths, args.import_path)
    for name, members in rules.passes.items():
        print(f"pass {name} ({len(members)} rules)")
        for r in members:
            prio = f" priority {r.priority}" if r.priority else ""
            print(f"  {r.name:28s} {short_location(r.location)}{prio}")
    for name, passes in rules.pipelines.items():
        print(f"pipeline {name}: {', '.join(passes)}")
    return 0


def register(sub) -> None:
    p = add_command(
        sub, "rules", run, "list rules by pass, and pipelines, with their locations",
        "ngrules rules rules/",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="default: the shipped library")
    add_import_path_option(p)
