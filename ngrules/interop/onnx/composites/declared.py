"""Ops declared in rules files (`op Name(params) = body`), written to ONNX with no Python.

A declaration that names its ONNX op (`op Leaky(x, slope: float = 0.01) = ... onnx
LeakyRelu(alpha=slope)`) is written as that op, its attributes evaluated on the node's own, when
the exporter's opset has it (any op of another domain, `com.microsoft.FusedGemm`, is taken as
named). Otherwise the node calls an ONNX function whose body is the declaration's body, exported
like any graph, in a domain named after the rules file (`acts` for `acts.rules`): one function
per op and argument types (the body is written with their lengths), `Silu`, `Silu_1`, ...

The exporter hands this module its `emit` function and `Emitter` class (so this module does not
import the exporter).
"""

from __future__ import annotations

import re
import weakref
from pathlib import Path

from ngrules.interop.onnx import OnnxError, proto
from ngrules.interop.onnx.exporting import dynamic
from ngrules.ir import declared
from ngrules.ir.graph import Node, toposort


class _Written:
    """What one export wrote for declared ops: functions by signature, domains imported."""

    def __init__(self):
        self.functions: dict[tuple, object] = {}  # signature -> FunctionProto
        self.names: dict[tuple[str, str], int] = {}  # (domain, op) -> functions of that op
        self.domains: dict[str, int] = {}  # domain -> opset version


_WRITTEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _written(em) -> _Written:
    state = _WRITTEN.get(em)
    if state is None:
        state = _WRITTEN[em] = _Written()
    return state


def is_declared(op: str) -> bool:
    return op in declared.DECLARATIONS


def domain_of(source: str) -> str:
    """The ONNX domain of the ops a rules file declares: its stem, as a dotted name."""
    stem = re.sub(r"[^A-Za-z0-9_]", "_", Path(source).stem) or "rules"
    return stem if stem[0].isalpha() else f"r{stem}"


def standard_op_available(op: str, opset: int) -> bool:
    """Whether the standard ONNX domain has `op` at `opset`."""
    try:
        proto.get_schema(op, opset, "")
    except Exception:  # onnx raises SchemaError (not exported on every version)
        return False
    return True


def export(em, n: Node, args: list[str], emit, new_emitter, opset: int):
    """The ONNX value name(s) of node n of a declared op, args being its arguments' names."""
    decl = declared.DECLARATIONS[n.op]
    target = decl.onnx
    if target is not None and (target.domain or standard_op_available(target.op, opset)):
        return _named_op(em, n, args, target)
    return _function_call(em, n, args, decl, emit, new_emitter, opset)


def _named_op(em, n: Node, args: list[str], target: declared.OnnxOp):
    """The named op on arguments put in the output's axes order (ONNX aligns trailing
    dimensions: an argument must hold the output's axes, or a trailing run of them)."""
    out_axes = n.axes if n.outputs is None else n.outputs[0][0]
    ordered = []
    for arg, name in zip(n.args, args):
        ordered.append(_in_output_order(em, arg, name, out_axes, n))
    if target.domain:
        _written(em).domains.setdefault(target.domain, 1)
    n_out = 1 if n.outputs is None else len(n.outputs)
    attrs = target.attributes(n.attrs)
    try:
        return em.node(target.op, ordered, n_out=n_out, domain=target.domain, **attrs)
    except (TypeError, ValueError) as e:  # onnx.helper: a value no attribute can hold
        raise OnnxError(
            f"cannot write {n!r} as ONNX {target.op}: attributes {attrs!r}: {e}"
        ) from None


def _in_output_order(em, arg: Node, name: str, out_axes, n: Node) -> str:
    names, wanted = list(arg.axes.names), [a for a in out_axes.names if a in arg.axes.names]
    if len(wanted) != len(names):
        raise OnnxError(
            f"cannot write {n!r} as its ONNX op: argument axes {arg.axes!r} are not among "
            f"the output's {out_axes!r}"
        )
    if wanted != list(out_axes.names)[len(out_axes) - len(wanted):]:
        raise OnnxError(
            f"cannot write {n!r} as its ONNX op: argument axes {arg.axes!r} are not the "
            f"output's last axes ({out_axes!r}), as ONNX broadcasting needs"
        )
    if wanted == names:
        return name
    return em.node("Transpose", [name], perm=[names.index(a) for a in wanted])


def _signature(n: Node) -> tuple:
    types = tuple((a.axes.names, a.axes.lengths, str(a.dtype)) for a in n.args)
    return (n.op, types, tuple(sorted((k, repr(v)) for k, v in n.attrs.items())))


def _function_call(em, n: Node, args, decl: declared.Declaration, emit, new_emitter, opset):
    state, domain = _written(em), domain_of(decl.source)
    key = _signature(n)
    function = state.functions.get(key)
    if function is None:
        count = state.names.get((domain, n.op), 0)
        state.names[(domain, n.op)] = count + 1
        name = n.op if count == 0 else f"{n.op}_{count}"
        function = state.functions[key] = _function(em, n, decl, domain, name, emit,
                                                    new_emitter, opset)
    state.domains.setdefault(domain, 1)
    n_out = 1 if n.outputs is None else len(n.outputs)
    return em.node(function.name, args, n_out=n_out, domain=domain)


def _function(em, n: Node, decl, domain: str, name: str, emit, new_emitter, opset):
    """The declaration's body on the node's argument types, as an ONNX function."""
    from ngrules.interop.onnx.exporting.layout import full_value
    from ngrules.interop.onnx.exporting.passes.finish import finish

    stand_ins, outputs = decl.body(n)
    sub = new_emitter()
    _WRITTEN[sub] = _written(em)  # functions the body calls are the model's too
    inputs = [f"x{i}" for i in range(len(stand_ins))]
    sub.values.update((s, full_value(x, s.axes)) for s, x in zip(stand_ins, inputs))
    for inner in toposort(outputs):
        if inner not in sub.values:
            emit(sub, inner)
    results = [f"y{i}" for i in range(len(outputs))]
    finish(sub, [sub.value(o) for o in outputs], results)  # outputs named, unread nodes dropped
    nodes = [_constant_node(t) for t in sub.inits] + list(sub.nodes)
    em.functions.update(sub.functions)
    imports = [proto.make_opsetid("", opset)]
    used = {d.domain for d in sub.nodes if d.domain} | set(_written(em).domains)
    imports += [proto.make_opsetid(d, 1) for d in sorted(used)]
    function = proto.make_function(domain, name, inputs, results, nodes, opset_imports=imports)
    dynamic.restore_function(function, [s.axes.lengths for s in stand_ins])
    return function


def _constant_node(tensor):
    return proto.make_node("Constant", [], [tensor.name], value=tensor)


def add_to_model(em, functions: list, opsets: list) -> None:
    """Append the functions and domains declared ops used in this export."""
    state = _WRITTEN.get(em)
    if state is None:
        return
    functions.extend(state.functions.values())
    known = {o.domain for o in opsets}
    opsets.extend(proto.make_opsetid(d, v) for d, v in sorted(state.domains.items())
                  if d not in known)
