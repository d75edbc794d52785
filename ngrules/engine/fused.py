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
from ngrules.lang.exprgen import generate_body

#: What the generated code leaves in `values` when it raised (then the continuation decides).
_FAILED = object()


def clause_function(rule, names: Sequence[str], root: object, pending: object) -> Callable | None:
    """`clauses(node, V, *bound)` for the compiled one-root rule `rule`, whose matcher binds
    `names` in this order; None if its clauses cannot be generated (the matcher then calls
    the continuation). `root` and `pending` are the bindings keys of the root and the walk's
    pending nodes that the continuation reads."""
    params = {name: f"p{i}" for i, name in enumerate(names)}
    try:
        body, consts = generate_body(rule.rule.clauses, rule.rule.replacement, params)
    except (KeyError, TypeError):
        return None
    *clauses, last = body
    assert last.startswith("    return ")
    keys = [f"_K{i}" for i in range(len(names))]
    consts.update({k: name for k, name in zip(keys, names)})
    consts.update(_G=graph, _FAILED=_FAILED, _Node=graph.Node, _same_type=same_type,
                  _ROOT=root, _PENDING=pending, _SLOW=rule._finish_single,
                  _FOUND=rule.located_found)
    bindings = "".join(f"{k}: {p}, " for k, p in zip(keys, params.values()))
    lines = [f"def clauses(node, V, {', '.join(params.values())}):"]
    needed = [params[n] for n in rule._needs_nodes if n in params]
    if needed:
        lines.append("    if V:")
        lines += [f"        {p} = V.force({p}) if {p} in V else {p}" for p in needed]
    lines += [
        "    log = _G.creation_log = []",
        "    try:",
        *["    " + line for line in clauses],
        "        values = " + last[len("    return "):],
        "    except Exception:",
        "        values = _FAILED",
        "    else:  # one node of the root's type: what `found` returns, without its calls",
        "        if len(values) == 1 and (v := values[0]).__class__ is _Node "
        "and _same_type(v, node):",
        "            return (node,), values, tuple(log)",
        "        return _FOUND(values, (node,), log)",
        "    finally:",
        "        _G.creation_log = None",
        f"    return _SLOW({{{bindings}_ROOT: node, _PENDING: V}})",
    ]
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<ngrules clauses>", "exec"), consts)  # noqa: S102 - generated
    function = consts["clauses"]
    function.source = source
    return function
