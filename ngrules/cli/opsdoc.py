"""The op reference (docs/ops-reference.md), generated from the op table.

`python -m ngrules.cli.opsdoc > docs/ops-reference.md` writes it; a test regenerates it and
compares, so the page never drifts from the table. Only the built-in ops are listed.
"""

from __future__ import annotations

import sys

import numpy as np

from ngrules.ir.ops import OPS, OpDef

HEADER = """\
# Op reference

Generated from the op table by `python -m ngrules.cli.opsdoc > docs/ops-reference.md`;
`tests/test_opsdoc.py` fails when this page and the table differ. Every op here can be
written in patterns and replacements as `Name(args..., attribute=value)`. How to add your
own ops: [ops.md](ops.md).

| op | arguments | attributes | traits | what it computes |
|---|---|---|---|---|
"""


_ARG_NAMES = "xyzuvw"


def _arity(op: OpDef) -> str:
    if op.arity is None:
        return "any number"
    if op.arity > len(_ARG_NAMES):
        return str(op.arity)
    domains = [op.arg_domain(i) for i in range(op.arity)]
    return ", ".join(
        _ARG_NAMES[i] + (f" ({d})" if d != "real" else "") for i, d in enumerate(domains)
    ) or "none"


def _value(value) -> str:
    if isinstance(value, (type, np.dtype)):  # a dtype, given as a numpy type
        return np.dtype(value).name
    return repr(value)


def _attrs(op: OpDef) -> str:
    parts = []
    for a in op.attrs:
        default = "" if a.required else f" = {_value(a.default)}"
        parts.append(f"`{a.name}: {a.kind}{default}`")
    return ", ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(ops=None) -> str:
    """The reference page for these ops (default: every op in the table), sorted by name."""
    ops = OPS if ops is None else ops
    rows = []
    for name in sorted(ops):
        op = ops[name]
        outputs = f"; {op.outputs} outputs" if op.outputs > 1 else ""
        traits = ", ".join(sorted(op.traits))
        rows.append(
            f"| `{name}` | {_arity(op)}{outputs} | {_cell(_attrs(op))} | {traits} "
            f"| {_cell(op.doc)} |"
        )
    return HEADER + "\n".join(rows) + "\n"


def main() -> None:
    from ngrules.ir import builtin  # noqa: F401  (fills the table with the built-in ops)

    sys.stdout.write(render())


if __name__ == "__main__":  # pragma: no cover
    main()
