"""A one-root rule's clauses and replacement generated as the end of its matcher.

The walk's matcher of a rule with guards or lets calls, at each way its pattern matches, one
generated function `clauses(node, V, p0, p1, ...)` that receives the bound nodes as arguments
(the matcher's own locals, in the pattern's order): it rebuilds the pending bindings the
clauses use as nodes, evaluates the lets and guards with the names read from its parameters
(no bindings dict, no continuation, no calls through the rule), builds the replacement and
returns `(roots, replacements, new nodes)`, or None when a guard is false (the matcher then
tries its next alternative).

Its semantics are `CompiledRule._finish_single`'s: if anything raises in the generated code,
the match is handed to that continuation with the bindings as a dict, which evaluates again
and reports a failure (located, or counted as a rejected match) as it always did. Nothing from
rule text enters the source: names are entries of the function's constant table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ngrules.engine.semantics import same_type
from ngrules.ir import graph
from ngrules.lang import code_cache
from ngrules.lang.exprgen import generate_body

#: What the generated code leaves in `values` when it raised (then the continuation decides).
_FAILED = object()


def clause_function(rule, names: Sequence[str], root: object, pending: object) -> Callable | None:
    """`clauses(node, V, *bound)` for the compiled one-root rule `rule`, whose matcher binds
    `names` in this order; None if its clauses cannot be generated (the matcher then calls
    the continuation). `root` and `pending` are the bindings keys of the root and the walk's
    pending nodes that the continuation reads."""
    params = {name: f"p{i}" for i, name in enumerate(names)}
    pasted = clause_lines(rule, params, "_", root, pending)
    if pasted is None:
        return None
    lines, consts = pasted
    header = [f"def clauses(node, V, {', '.join(params.values())}):"]
    source = "\n".join([*header, *["    " + line for line in lines], "    return r"]) + "\n"
    exec(code_cache.compiled(source, "<ngrules clauses>"), consts)  # noqa: S102 - generated
    function = consts["clauses"]
    function.source = source
    return function


def clause_lines(
    rule, bound: dict[str, str], prefix: str, root: object, pending: object
) -> tuple[list[str], dict] | None:
    """The clauses of the compiled one-root rule `rule` as lines (at indent 0) that set the
    local `r` to what `clauses` returns, with the pattern's names read from the locals `bound`
    gives them (not assigned to: a matcher pasting these lines may backtrack), their own
    locals and constants named with `prefix`; None if they cannot be generated."""
    nodes = {name: f"{prefix}P{i}" for i, name in enumerate(bound)}
    needed = [n for n in rule._needs_nodes if n in bound]  # pending: rebuilt as nodes
    params = {n: nodes[n] if n in needed else local for n, local in bound.items()}
    try:
        body, consts = generate_body(rule.rule.clauses, rule.rule.replacement, params, prefix,
                                     on_false="break")
    except (KeyError, TypeError):
        return None
    *clauses, last = body
    assert last.startswith("    return ")
    p = prefix
    keys = {name: f"{p}K{i}" for i, name in enumerate(bound)}
    consts.update({k: name for name, k in keys.items()})
    consts.update({"_G": graph, "_FAILED": _FAILED, "_Node": graph.Node, "_same_type": same_type,
                   f"{p}ROOT": root, f"{p}PENDING": pending, f"{p}SLOW": rule._finish_single,
                   f"{p}FOUND": rule.located_found})
    bindings = "".join(f"{keys[n]}: {params[n]}, " for n in bound)
    forced = [f"{nodes[n]} = V.force({bound[n]}) if {bound[n]} in V else {bound[n]}"
              for n in needed]
    lines = [
        *forced,
        f"{p}values = None",
        f"{p}log = _G.creation_log = []",
        "try:",
        "    while True:  # a false guard breaks out",
        *["    " + line for line in clauses],
        f"        {p}values = " + last[len("    return "):],
        "        break",
        "except Exception:",
        f"    {p}values = _FAILED",
        "else:  # one node of the root's type: what `found` returns, without its calls",
        f"    if {p}values is None:",
        "        r = None",
        f"    elif len({p}values) == 1 and ({p}v := {p}values[0]).__class__ is _Node and "
        f"({p}v.axes is node.axes and {p}v.dtype is node.dtype and {p}v.outputs is None "
        f"and node.outputs is None or _same_type({p}v, node)):",
        f"        r = (node,), {p}values, tuple({p}log)",
        "    else:",
        f"        r = {p}FOUND({p}values, (node,), {p}log)",
        "finally:",
        "    _G.creation_log = None",
        f"if {p}values is _FAILED:",
        f"    r = {p}SLOW({{{bindings}{p}ROOT: node, {p}PENDING: V}})",
    ]
    return lines, consts
