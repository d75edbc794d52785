"""`to_onnx`: an ngrules graph as a standard ONNX model.

Every value is written in an order of dimensions the exporter chooses (`layout`): views cost
nothing, ONNX's broadcasting replaces `Expand`, and Conv and pooling read and write NCHW, so a
model read from ONNX comes back in its own order, with no transposes it did not have. Ops go
out as the ONNX op they came from where there is one (`elementwise`, `products`: MatMul,
Gemm, Flatten, Softmax with its axis, BatchNormalization, LayerNormalization, Gelu, ...); the
rest as before over their operands in their own order (`positional`, with the network
ops of `positional_ops`). Fused ops without a standard twin are ONNX functions of the `ngrules`
domain (`functions`); ops declared in rules files go out through `declared` (their named ONNX op,
or a function of their body). A last pass (`finish`) drops what no output reads and names
the outputs; `dynamic` then writes symbolic dimensions back as dim_params.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ngrules.interop.onnx import OnnxError, proto, require_onnx, weights
from ngrules.interop.onnx.budget import DEFAULT_BUDGET, Budget, Meter
from ngrules.interop.onnx.composites import declared, orders, whole
from ngrules.interop.onnx.exporting import as_read, dynamic
from ngrules.interop.onnx.exporting.emitter import (
    LAYOUT,
    OPSET,
    OPSETS,
    Emitter,
    preferred_orders,
    window_operands,
)
from ngrules.interop.onnx.exporting.functions import DOMAIN, FUNCTIONS
from ngrules.interop.onnx.exporting.layout import Value, constant_value, full_value
from ngrules.interop.onnx.exporting.passes import (
    constants,
    downgrade,
    gelu_chains,
    ort_target,
    refused,
    shuffle,
    transposes,
    unit_views,
)
from ngrules.interop.onnx.exporting.read_orders import SLICES, same_order, slice_sources
from ngrules.interop.onnx.exporting.writers.elementwise import LOADED as _LAYOUT_OPS
from ngrules.interop.onnx.exporting.writers.forms import LOADED as _FORMS
from ngrules.interop.onnx.exporting.writers.positional import POSITIONAL, elem_type
from ngrules.interop.onnx.exporting.writers.products import LOADED as _NN_OPS
from ngrules.interop.onnx.exporting.writers.recurrent import LOADED as _RECURRENT
from ngrules.interop.onnx.importing.context import INPUT_ORDER
from ngrules.ir import composite, symbolic
from ngrules.ir.graph import Node, toposort
from ngrules.ir.ops import get_op

#: op name -> node -> an equivalent node built from exportable ops on the same arguments.
EXPANSIONS: dict[str, Callable[[Node], Node]] = {}


def register_expansion(op: str, expand: Callable[[Node], Node]) -> None:
    """Export `op` (a user's fused op, say) as the standard ops of `expand(node)`, a node of
    the same axes and dtype built on `node.args` from ops that export."""
    EXPANSIONS[op] = expand


def _expanded(em: Emitter, n: Node) -> Value:
    """Emit the expansion of n, reusing the values of its arguments."""
    body = EXPANSIONS[n.op](n)
    if body.axes != n.axes or body.dtype != n.dtype:
        raise OnnxError(f"the ONNX expansion of {n!r} has axes {body.axes!r} {body.dtype}")
    for inner in toposort([body]):
        if inner not in em.values:
            _emit(em, inner)
    return em.values[body]


def _leaf(em: Emitter, n: Node) -> Value:
    if n.op == "Placeholder":
        name = n.attrs["name"]
        em.inputs.append(proto.make_tensor_value_info(name, elem_type(n.dtype), n.axes.lengths))
        return full_value(name, n.axes)
    value = np.asarray(get_op(n.op).kernel(n)())  # as the executor: a variable is `initial`
    if n.op == "Constant":
        return constant_value(value, n.axes)
    name = n.attrs["name"]
    em.initializer(value, name)
    return full_value(name, n.axes)


def _positional(em: Emitter, n: Node, fn) -> Value:
    out = fn(em, n, [em.exact(a) for a in n.args])
    if isinstance(out, list):  # a multi-output node: Output picks its parts
        em.parts[n] = out
        return Value((), (), out[0])
    return full_value(out, n.axes)


def _emit(em: Emitter, n: Node) -> None:
    if not n.args:
        em.values[n] = _leaf(em, n)
        return
    if n.op == "Output":
        em.values[n] = full_value(em.parts[n.args[0]][n.attrs["index"]], n.axes)
        return
    folded = _folded(em, n)
    if folded is not None:
        em.values[n] = folded
        return
    if n.op in LAYOUT:
        em.values[n] = LAYOUT[n.op](em, n)
        return
    if composite.is_composite(n.op):  # an ONNX op kept whole: written as it was read
        em.values[n] = _composite(em, n)
        return
    fn = POSITIONAL.get(n.op)
    if fn is None and declared.is_declared(n.op):  # an `op` of a rules file
        em.values[n] = _declared_in_place(em, n) or _positional(em, n, _declared)
        return
    if fn is None and n.op in EXPANSIONS:
        em.values[n] = _expanded(em, n)
        return
    if fn is None:
        raise OnnxError(
            f"cannot export op {n.op} to ONNX (give it an expansion with register_expansion); "
            f"exportable: {', '.join(sorted(exportable_ops()))}"
        )
    em.values[n] = _positional(em, n, fn)


def _declared(em: Emitter, n: Node, args: list[str]):
    """A declared op over its operands in their own order: its ONNX op or a function call (a
    function's body is exported with a fresh Emitter at this export's opset)."""
    return declared.export(em, n, args, _emit, lambda: Emitter(em.opset), em.opset)


def _declared_in_place(em: Emitter, n: Node) -> Value | None:
    """A declared op over operands holding its axes in one order their values share (a SiLU
    after a Conv, in NCHW): the op on views of them in that order, its result left there. In
    the node's own order, a Transpose went in and out of each (EfficientNet with a SiLU op:
    98 Transposes, 33 Reshapes)."""
    from ngrules.ir.frontend import axes_with_order
    from ngrules.ir.graph import make_node

    values = [em.values[a] for a in n.args]
    order = values[0].dims if values else ()
    if (n.outputs is not None or not values or order == tuple(n.axes)
            or set(order) != set(n.axes) or len(order) != len(n.axes)):
        return None
    if any(v.dims != order or v.array is not None or not v.has_all(a.axes)
           or set(a.axes) != set(order) for v, a in zip(values, n.args)):
        return None
    views = [axes_with_order(a, order) for a in n.args]
    moved = make_node(n.op, tuple(views), **n.attrs)  # inferred again: the views' order
    if tuple(moved.axes) != order:
        return None
    for view, v in zip(views, values):
        em.values[view] = full_value(v.name, order)
    return _positional(em, moved, _declared)


def _composite(em: Emitter, n: Node) -> Value:
    """The ONNX node a composite stands for, or its body where the opset cannot hold it."""
    out = whole.write(em, n)
    if out is not None:
        return full_value(out[0], whole.positional(n, out[1]))
    return em.write([composite.body(n)])[0]


#: ONNX stores dimensions as int64.
INT64_MAX = 2**63 - 1


def _check_lengths(n: Node) -> None:
    """An axis longer than an int64 holds cannot be an ONNX dimension: say so, by name."""
    for axes in [n.axes] if n.outputs is None else [axes for axes, _ in n.outputs]:
        for axis in axes:
            if axis.length > INT64_MAX:
                raise OnnxError(
                    f"cannot export {n.op}: axis {axis.name} has length {axis.length}, more "
                    f"than an ONNX dimension holds (2^63 - 1)"
                )


#: A node of constants is written as its value when that has at most this many elements
#: beyond its operands' (so a folded batchnorm leaves scaled weights, never a blown-up tensor).
FOLD_LIMIT = 4096

#: ... and when computing it visits at most this many elements (its operands' and its own
#: axes together, broadcasts at their full size): a Sum over a scalar broadcast to 10^12
#: elements stays a ReduceSum, not 10 minutes inside one numpy call.
FOLD_WORK = 1 << 24


def _folded(em: Emitter, n: Node) -> Value | None:
    """The value of a node whose operands are all constants, computed with the op table's
    kernel (views and multi-output ops stay as they are: they cost nothing or split)."""
    op = get_op(n.op)
    if (op.has("view") or op.has("multi_output") or n.op == "Output"
            or not all(em.values[a].array is not None for a in n.args)):
        return None
    if symbolic.STAND_INS and any(symbolic.symbols_of(a.axes.size) for a in n.args):
        return None  # over a symbolic length (a count of it): computed at run time
    size = sum(em.values[a].array.size for a in n.args)
    if n.axes.size > size + FOLD_LIMIT or _work(n) > FOLD_WORK:
        return None
    em.meter.check_time(f"folding {n.op}")
    value = np.asarray(op.kernel(n)(*(em.array(a) for a in n.args)), dtype=n.dtype)
    em.meter.charge(value.nbytes, f"folding {n.op}")
    return constant_value(value.reshape(n.axes.lengths), n.axes)


def _work(n: Node) -> int:
    """A bound on the elements a kernel visits: the product of the lengths of every axis its
    operands and its output have (a product's contracted axis counted once; for elementwise
    ops and reductions, the largest operand's size)."""
    axes: dict[str, int] = {}
    for x in (n, *n.args):
        for a in x.axes:
            axes[a.name] = max(axes.get(a.name, 1), a.length)
    return math.prod(axes.values())


def exportable_ops() -> set[str]:
    assert _LAYOUT_OPS and _NN_OPS and _FORMS and _RECURRENT  # their ops are registered
    return set(POSITIONAL) | set(LAYOUT)


def _read_orders(order: Sequence[Node], outputs: Sequence[Node]) -> dict:
    """`read_orders.slice_sources` with what the writers here fix: an ONNX op kept whole
    reads its operands in the model's order and writes in it (one whose body is written
    where they are not only when its readers want that order); a positional writer reads and
    writes its own."""
    if not any(n.op in SLICES for n in order):
        return {}
    whole_ = functools.cache(orders.writes_whole)

    def reads(n: Node, want: tuple | None):
        if n.op in LAYOUT:
            return None
        if composite.is_composite(n.op):
            fixed = whole_(n) or (want is not None and same_order(want, orders.output_order(n)))
            return orders.operand_orders(n) if fixed else []
        return [(a, tuple(a.axes)) for a in n.args] if n.op in POSITIONAL else []

    def makes(n: Node) -> tuple | None:
        if not n.args or (n.op not in LAYOUT and n.op in POSITIONAL):
            return tuple(n.axes)
        if n.op not in LAYOUT and composite.is_composite(n.op) and whole_(n):
            return orders.output_order(n)
        return None

    return slice_sources(order, outputs, reads, makes)


def _users(order: Sequence[Node]) -> dict[Node, int]:
    users: dict[Node, int] = {}
    for n in order:
        for a in n.args:
            users[a] = users.get(a, 0) + 1
    return users


def to_onnx(outputs: Sequence[Node], **options):
    """A valid ONNX `ModelProto` computing `outputs` (each in its node's axes order);
    `options` are `export_parts`'s (`output_names`, `name`, `opset`, `target`)."""
    model, arrays = export_parts(outputs, **options)
    weights.add_to(model, arrays)
    return model


def export_parts(
    outputs: Sequence[Node],
    *,
    output_names: Sequence[str] | None = None,
    name: str = "ngrules",
    opset: int = OPSET,
    target: str = "onnx",
    budget: Budget = DEFAULT_BUDGET,
    check: bool = True,
):
    """`to_onnx`'s model without its large initializers, checked as if it had them, and those
    initializers as arrays (name -> array, not copied): `weights.write` writes the two as one
    model file, `weights.add_to` makes them one ModelProto. `target="onnxruntime"` joins
    nodes into onnxruntime's contrib ops (`ort_target`). `budget` bounds the whole export:
    the values it folds and the time it takes. With `check=False` the caller runs the check,
    `checker(outputs)`, itself (`weights.write` does, while the file is written)."""
    require_onnx()

    from ngrules.interop.onnx.exporting.passes.finish import finish
    from ngrules.interop.onnx.exporting.writers import origins, recipe_writer

    if opset not in range(downgrade.OLDEST, OPSETS.stop) or opset > proto.onnx_opset_version():
        raise OnnxError(f"to_onnx writes opsets {downgrade.OLDEST} to {OPSETS.stop - 1}, "
                        f"not {opset}")
    if target not in ort_target.TARGETS:
        raise OnnxError(f"to_onnx targets {' or '.join(ort_target.TARGETS)}, not {target!r}")
    outputs = composite.recompose(outputs)  # bodies no rule changed: the ops as read
    outputs = composite.decompose(outputs, record=False,  # those the opset cannot hold: bodies
                                  where=lambda n: not whole.writable(n, opset))
    names = list(output_names) if output_names else [f"output_{i}" for i in range(len(outputs))]
    if len(names) != len(outputs):
        raise OnnxError(f"{len(outputs)} outputs but {len(names)} output names")
    order = toposort(outputs)
    em = Emitter(max(opset, OPSET), _users(order), separate=True)  # older: `downgrade`
    em.target = opset
    em.meter = Meter(budget, "export")
    em.emit = _emit
    em.prefer = preferred_orders(order, outputs, em.users)
    em.window_read = window_operands(order)
    em.slice_source = _read_orders(order, outputs)
    for n in order:
        em.meter.check_time(f"writing {n.op}")
        _check_lengths(n)
        if n not in em.values:  # a fused op's writer may have written a node it shares
            _emit(em, n)
    results = [em.exact(node) for node in outputs]
    written = origins.write_back(em, outputs, names, opset)  # folded outputs: their nodes
    rank = {n.attrs["name"]: INPUT_ORDER.get(n, -1) for n in order if n.op == "Placeholder"}
    em.inputs.sort(key=lambda vi: rank.get(vi.name, -1))  # the model's order of its inputs
    source = as_read.of(order)  # the model read: its inputs nothing reads, its refusals
    as_read.add_unread(em, source)
    renames = finish(em, results, names, written)
    recipe_writer.write_back(em, order, opset, renames)  # shape computations: their nodes
    graph_outputs = [proto.make_tensor_value_info(out, elem_type(node.dtype), node.axes.lengths)
                     for node, out in zip(outputs, names)]
    graph = proto.make_graph(em.nodes, name, em.inputs, graph_outputs, em.inits)
    opsets = [proto.make_opsetid("", em.opset)]
    functions = [FUNCTIONS[f](em.opset) for f in sorted(em.functions)]
    if functions:
        opsets.append(proto.make_opsetid(DOMAIN, 1))
    declared.add_to_model(em, functions, opsets)
    whole.add_domains(em, opsets)
    model = proto.make_model(graph, opset_imports=opsets, functions=functions,
                              producer_name="ngrules")
    model.ir_version = min(model.ir_version, 8 if opset < 19 else 9 if opset < 21 else 10)
    fresh = functools.partial(em.fresh, "c")  # the new constants' names
    constants.join_in_model(model, fresh)  # (x + c1) + c2: x + c
    transposes.join_in_model(model, em.weights, fresh)
    shuffle.absorb_in_model(model, em.weights, fresh)  # into the convs
    gelu_chains.join_in_model(model, em.opset)  # GELU in elementwise nodes as one node
    dynamic.restore(model, em.weights)  # dim_params back, run-time shapes, no stand-in left
    as_read.name_outputs(model, source)  # outputs' own symbols (`Reshapey_dim_2`) back
    em.meter.check_time("checking the written model")
    if target == "onnxruntime":
        ort_target.for_onnxruntime(model, em.weights, fresh)
    unit_views.name_in_model(model, em.weights, fresh)  # Unsqueeze
    downgrade.to_opset(model, opset, em.weights)  # an older opset's forms
    if check:
        refused.check(model, em.weights, source)  # onnx's checker, onnxruntime's rules, session
    return model, em.weights


def checker(outputs: Sequence[Node]) -> Callable[[Any, Mapping[str, np.ndarray]], None]:
    """The check `export_parts(outputs, check=False)` left to its caller: `refused.check`
    with the record of the model read, so a refusal that model has too is a warning."""
    source = as_read.of(toposort(outputs))
    return lambda model, arrays: refused.check(model, arrays, source)
