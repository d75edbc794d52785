"""Ops and functions described for people: signatures, attributes and axes rules as text.

One wording shared by `ngrules ops`, the language server's hovers and completions, so an op
reads the same wherever it is shown. Everything is read from the op table and the function
table; nothing here is written per op.
"""

from __future__ import annotations

from ngrules.ir.ops import OpDef
from ngrules.lang.functions import FunctionDef

_ARG_NAMES = ("x", "y", "z")


def _arg_names(arity: int | None) -> list[str]:
    if arity is None:
        return ["*args"]
    if arity <= len(_ARG_NAMES):
        return list(_ARG_NAMES[:arity])
    return [f"x{i}" for i in range(arity)]


def op_signature(op: OpDef) -> str:
    """`Sum(x, reduction_axes: axes)`, `Relu(x, slope: float = 0.0)`, `-> 3 outputs` if several."""
    parts = _arg_names(op.arity)
    for a in op.attrs:
        parts.append(f"{a.name}: {a.kind}" + ("" if a.required else f" = {a.default!r}"))
    text = f"{op.name}({', '.join(parts)})"
    return text + (f" -> {op.outputs} outputs" if op.outputs > 1 else "")


def axes_rule(op: OpDef) -> str:
    """How the op's output axes follow from its operands, in one sentence."""
    if op.has("elementwise"):
        return "the operands' axes, broadcast together (ngraph's elementwise rule)"
    if op.has("reduction"):
        return "the operand's axes less `reduction_axes`"
    if op.has("leaf") or op.attr("axes") is not None:
        return "its `axes` attribute"
    if op.outputs > 1:
        return "one type per output (see the op's description)"
    return "see the op's description"


def op_summary(op: OpDef) -> str:
    """The signature, then the description, axes rule and traits: several lines."""
    lines = [op_signature(op)]
    if op.doc:
        lines.append(op.doc)
    lines.append(f"axes: {axes_rule(op)}")
    if op.traits:
        lines.append(f"traits: {', '.join(sorted(op.traits))}")
    return "\n".join(lines)


def function_signature(f: FunctionDef) -> str:
    """`new_axis(a0, a1?)`: the function's positional arguments, optional ones marked."""
    sig = f.signature()
    if sig is not None:
        shown = [str(p).replace("'", "") for p in sig.parameters.values()]
        return f"{f.name}({', '.join(shown)})"
    names = [f"a{i}" for i in range(f.min_args)]
    if f.max_args is None:
        names.append("*more")
    else:
        names += [f"a{i}?" for i in range(f.min_args, f.max_args)]
    return f"{f.name}({', '.join(names)})"


def function_summary(f: FunctionDef) -> str:
    """The signature, then what it does and whether it builds nodes."""
    lines = [function_signature(f)]
    if f.doc:
        lines.append(f.doc)
    lines.append("builds graph nodes" if f.kind == "builder" else "a pure function")
    return "\n".join(lines)
