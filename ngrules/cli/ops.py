"""`ngrules ops [NAME...]`: the op table, each op with its signature, axes rule and traits."""

from __future__ import annotations

from ngrules.cli.common import add_command
from ngrules.errors import NgrulesError


def run(args) -> int:
    from ngrules.ir.ops import OPS, did_you_mean, suggested_ops
    from ngrules.lang.describe import op_summary

    names = args.names or list(OPS)
    for name in names:
        if name not in OPS:
            raise NgrulesError(f"unknown op {name!r}{did_you_mean(name, suggested_ops())}")
    for name in names:
        head, *rest = op_summary(OPS[name]).split("\n")
        print(head)
        for line in rest:
            print(f"    {line}")
    return 0


def register(sub) -> None:
    p = add_command(
        sub, "ops", run, "list the ops rules can use, with signatures and axes rules",
        "ngrules ops Dot Sum",
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="only these ops")
