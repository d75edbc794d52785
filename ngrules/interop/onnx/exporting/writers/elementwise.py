"""Elementwise ops, views, reductions and slices written in the order of their operands.

An elementwise op keeps the dimension order of its fullest operand and lets ONNX broadcast the
others (`Layouts.aligned`); views change only the record of what each dimension holds; a
reduction names the positions its axes have in the operand. Nothing here transposes unless an
operand's order disagrees with the operand it is combined with.
"""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx import OnnxError
from ngrules.interop.onnx.exporting.emitter import Emitter, layout_exporter
from ngrules.interop.onnx.exporting.layout import Value, full_value
from ngrules.interop.onnx.exporting.writers.positional import elem_type
from ngrules.interop.onnx.importing.context import READ_AS_FLATTEN, READ_AS_RESHAPE
from ngrules.ir.graph import Node

_BINARY = {
    "Add": "Add", "Subtract": "Sub", "Multiply": "Mul", "Divide": "Div", "Maximum": "Max",
    "Minimum": "Min", "Power": "Pow",
}
_LOGICAL = {
    "Equal": "Equal", "Greater": "Greater", "Less": "Less", "GreaterEqual": "GreaterOrEqual",
    "LessEqual": "LessOrEqual", "Select": "Where",
}
_UNARY = {
    "Negative": "Neg", "Reciprocal": "Reciprocal", "Sqrt": "Sqrt", "Exp": "Exp", "Log": "Log",
    "Tanh": "Tanh", "Erf": "Erf", "Absolute": "Abs", "Sign": "Sign", "Sigmoid": "Sigmoid",
}

#: Ops written in their operand's order of dimensions, whatever order that is (`read_orders`).
ORDER_KEEPING = frozenset({*_UNARY, "Cast", "Relu", "Square"})
#: Ops written over ONNX's broadcasting in the order of their fullest operand.
BROADCASTING = frozenset({*_BINARY, *_LOGICAL})


def target_dims(em: Emitter, n: Node) -> tuple:
    """The result's dimension order: its fullest operand's, with the axes only other operands
    carry in front (where ONNX's broadcasting puts them anyway)."""
    vals = [em.values[a] for a in n.args]
    best = max(vals, key=lambda v: sum(v.full(a) for a in n.axes if a.length > 1))
    dims = tuple(best.dims)
    extra = tuple(a for a in n.axes if a not in dims and any(v.full(a) for v in vals))
    return extra + dims


def _in_own_order(em: Emitter, n: Node) -> tuple | None:
    """The node's own order of axes, where every operand holds its dimensions in that order
    (so aligning them reshapes at most: no Transpose), else None."""
    for a in n.args:
        v = em.values[a]
        present = [d for d in v.dims if d in n.axes]
        if present != [d for d in n.axes if d in present]:
            return None
    return tuple(n.axes)


def broadcast_result(em: Emitter, n: Node, op: str, cast: bool = False, own: bool = False,
                     **attrs) -> Value:
    """`op` over the operands aligned to the target order (with `own`, the node's order where
    the operands allow it); bool operands of arithmetic are cast to the result's dtype first
    (masks)."""
    dims = (own and _in_own_order(em, n)) or target_dims(em, n)
    names = []
    for arg in n.args:
        name = em.aligned(arg, dims)
        if cast and arg.dtype != n.dtype:
            name = em.node("Cast", [name], to=elem_type(n.dtype))
        names.append(name)
    vals = [em.values[a] for a in n.args]
    shape = tuple(max((v.shape[v.dims.index(d)] for v in vals if d in v.dims), default=1)
                  for d in dims)
    return Value(dims, shape, em.node(op, names, **attrs))


def _binary(em: Emitter, n: Node) -> Value:
    return broadcast_result(em, n, _BINARY[n.op], cast=True)


for _op in _BINARY:
    if _op not in ("Add", "Divide"):  # products writes those (Gemm, ReduceMean)
        layout_exporter(_op)(_binary)


@layout_exporter(*_LOGICAL)
def _logical(em: Emitter, n: Node) -> Value:
    return broadcast_result(em, n, _LOGICAL[n.op])


@layout_exporter("And", "Or", "Xor")
def _bitwise(em: Emitter, n: Node) -> Value:
    """Logic on masks, over ONNX's broadcasting (no Expand), in the mask's own order (an
    attention mask read by scores in that order); on integers it is bitwise, from opset 18."""
    if n.dtype != np.bool_:
        raise OnnxError(f"cannot export {n!r}: bitwise {n.op} on integers needs opset 18")
    return broadcast_result(em, n, n.op, own=True)


@layout_exporter("NotEqual")
def _not_equal(em: Emitter, n: Node) -> Value:
    v = broadcast_result(em, n, "Equal")
    return Value(v.dims, v.shape, em.node("Not", [v.name]))


def unary(em: Emitter, n: Node, op: str, **attrs) -> Value:
    v = em.values[n.args[0]]
    return Value(v.dims, v.shape, em.node(op, [em.name_of(v)], **attrs))


@layout_exporter(*_UNARY)
def _unary(em: Emitter, n: Node) -> Value:
    return unary(em, n, _UNARY[n.op])


@layout_exporter("Square")
def _square(em: Emitter, n: Node) -> Value:
    v = em.values[n.args[0]]
    x = em.name_of(v)
    return Value(v.dims, v.shape, em.node("Mul", [x, x]))


@layout_exporter("Cast")
def _cast(em: Emitter, n: Node) -> Value:
    return unary(em, n, "Cast", to=elem_type(n.dtype))


@layout_exporter("Relu")
def relu(em: Emitter, n: Node) -> Value:
    slope = n.attrs["slope"]
    return unary(em, n, "Relu") if slope == 0.0 else unary(em, n, "LeakyRelu", alpha=slope)


# -- views -------------------------------------------------------------------------------------
@layout_exporter("Broadcast", "ReorderAxes", "Transpose", "ExpandDims")
def _view(em: Emitter, n: Node) -> Value:
    return em.values[n.args[0]]


@layout_exporter("AxesCast")
def _axes_cast(em: Emitter, n: Node) -> Value:
    v = em.values[n.args[0]]
    renamed = dict(zip(n.args[0].axes, n.axes))
    return Value(tuple(renamed.get(d, d) for d in v.dims), v.shape, v.name, v.array)


def _source(em: Emitter, n: Node, axes) -> Value:
    """The value slice n reads: its operand in the order `read_orders` chose for it (one
    Transpose shared by the slices), else as it is with `axes` at full length."""
    x = n.args[0]
    order = em.slice_source.get(n)
    if order is not None and not em.ordered(em.values[x], order):
        return full_value(em.exact(x, order), order)
    return em.complete(x, axes) if axes else em.values[x]


@layout_exporter("TensorSlice")
def _tensor_slice(em: Emitter, n: Node) -> Value:
    """A Slice over the positions the axes have; integer-indexed axes stay as length-1
    dimensions (no reshape); an axis only dropped (length 1, index 0) costs nothing."""
    x = n.args[0]
    rows = np.asarray(n.attrs["slices"]).tolist()
    kept = iter(n.axes)
    renamed = {a: (None if r[2] == 0 else next(kept)) for r, a in zip(rows, x.axes)}
    moving = [(r, a) for r, a in zip(rows, x.axes) if not _whole(r, a)]
    v = _source(em, n, [a for _, a in moving])
    if moving:
        starts = [r[0] for r, _ in moving]
        stops = [r[0] + 1 if r[2] == 0 else r[1] for r, _ in moving]
        where = [v.dims.index(a) for _, a in moving]
        steps = [r[2] or 1 for r, _ in moving]
        name = sliced(em, x, v, (starts, stops, where, steps))
        v = Value(v.dims, _sliced_shape(v, moving), name)
    dims = tuple(renamed.get(d) or d for d in v.dims)
    return Value(dims, v.shape, v.name, v.array)


def sliced(em: Emitter, x: Node, v: Value, spec) -> str:
    """One ONNX Slice (starts, ends, axes, steps) of v; a slice of a slice read only here
    along other dimensions is one Slice of the first one's input (the first is then unread)."""
    name = em.name_of(v)
    earlier = em.slices.get(name)
    if earlier is not None and em.single_use(x) and not set(earlier[1][2]) & set(spec[2]):
        source, parts = earlier
        spec = tuple(a + b for a, b in zip(parts, spec))
    else:
        source = name
    out = em.node("Slice", [source, *(em.const(list(p)) for p in spec)])
    em.slices[out] = (source, spec)
    if source == name and len(spec[2]) == 1 and spec[3][0] == 1:
        em.slice_extent[out] = v.shape[spec[2][0]]
    return out


def _whole(row, axis) -> bool:
    """Whether a slice row keeps the axis as it is (or drops it when it has length 1)."""
    start, stop, step = row
    if step == 0:
        return axis.length == 1
    return start == 0 and step == 1 and stop >= axis.length


def _sliced_shape(v: Value, moving) -> tuple:
    shape = list(v.shape)
    for (start, stop, step), a in moving:
        i = v.dims.index(a)
        shape[i] = 1 if step == 0 else len(range(start, min(stop, a.length), step))
    return tuple(shape)


@layout_exporter("Slice")
def _slice(em: Emitter, n: Node) -> Value:
    x, at = n.args[0], n.attrs
    axis = x.axes[at["position"]]
    v = _source(em, n, [axis])
    pos = v.dims.index(axis)
    name = sliced(em, x, v, ([at["start"]], [at["stop"]], [pos], [1]))
    dims = tuple(at["axis"] if d == axis else d for d in v.dims)
    shape = tuple(at["axis"].length if d == axis else s for d, s in zip(v.dims, v.shape))
    return Value(dims, shape, name)


@layout_exporter("Flatten", "Unflatten")
def regroup(em: Emitter, n: Node) -> Value:
    """Row-major regrouping: where each merged group of axes lies in order in the operand's
    value, one Reshape (or Flatten, or nothing for a renaming) at the positions they have;
    else the operand in its own order first."""
    x = n.args[0]
    v = em.values[x]
    dims, shape = _regrouped(v, _groups(x.axes, n.axes))
    if dims is None:
        order = tuple(a for a in x.axes if a.length > 1)
        v = full_value(em.exact(x, order), order)
        dims, shape = tuple(n.axes), n.axes.lengths
    if shape == v.shape:
        return Value(dims, shape, v.name, v.array)
    if v.array is not None:
        return Value(dims, shape, array=v.array.reshape(shape))
    split = _flatten_split(v.shape, shape)
    if split is not None and not _reshaped_before(em, v.name) and (
            n not in READ_AS_RESHAPE or n in READ_AS_FLATTEN):  # a model's Reshape: as read
        return Value(dims, shape, em.node("Flatten", [v.name], axis=split))
    dims, shape = _without_stale_units(dims, shape, n.axes)
    return Value(dims, shape, em.node("Reshape", [v.name, em.const(list(shape))]))


def _without_stale_units(dims, shape, axes):
    """A Reshape being written anyway drops the unit dimensions of axes the node does not
    have (a sliced-off index): onnxruntime's elementwise kernels run a trailing unit
    dimension element by element (a Mul by a scalar 25x slower)."""
    kept = [(d, s) for d, s in zip(dims, shape) if s != 1 or d in axes]
    return tuple(d for d, _ in kept), tuple(s for _, s in kept)


def _reshaped_before(em: Emitter, name: str) -> bool:
    """Whether a Reshape or Flatten wrote `name` (then a Reshape, which the last pass merges
    with it, is one node where a Flatten would be a second)."""
    node = next((nd for nd in reversed(em.nodes) if name in nd.output), None)
    return node is not None and node.op_type in ("Reshape", "Flatten")


def _groups(src, dst) -> list[tuple[list, list]]:
    """Pairs of consecutive runs of src and dst axes holding the same leaves."""
    src, dst, out = list(src), list(dst), []
    i = j = 0
    while i < len(src) and j < len(dst):
        a, b = [src[i]], [dst[j]]
        na, nb = len(src[i].leaves()), len(dst[j].leaves())
        i, j = i + 1, j + 1
        while na != nb:
            if na < nb:
                a.append(src[i])
                na, i = na + len(src[i].leaves()), i + 1
            else:
                b.append(dst[j])
                nb, j = nb + len(dst[j].leaves()), j + 1
        out.append((a, b))
    return out


def _regrouped(v: Value, groups):
    """(dims, shape) of v regrouped in place, or (None, None) when a merged group is not
    contiguous and in order (or not whole) in v."""
    starts: dict = {}
    for src, dst in groups:
        big = [a for a in src if a.length > 1]
        if not big:
            continue
        if not all(v.full(a) for a in big):
            return None, None
        at = [v.dims.index(a) for a in big]
        inner = [d for d in v.dims[at[0]:at[-1] + 1] if d not in big]
        if at != sorted(at) or any(v.shape[v.dims.index(d)] != 1 for d in inner):
            return None, None
        starts[at[0]] = [b for b in dst if b.length > 1]
    covered = {a for src, _ in groups for a in src}
    dims: list = []
    shape: list = []
    for i, (d, length) in enumerate(zip(v.dims, v.shape)):
        if i in starts:
            dims.extend(starts[i])
            shape.extend(b.length for b in starts[i])
        elif d not in covered:  # a unit dimension stays; merged or length-1 axes go
            dims.append(d)
            shape.append(length)
    return tuple(dims), tuple(shape)


def _flatten_split(shape, lengths):
    """The `axis` of an ONNX Flatten from `shape` to the 2-D `lengths`, if one gives it."""
    if len(lengths) != 2:
        return None
    for k in range(len(shape) + 1):
        if int(np.prod(shape[:k])) == lengths[0] and int(np.prod(shape[k:])) == lengths[1]:
            return k
    return None


# -- reductions --------------------------------------------------------------------------------
_REDUCE = {"Sum": "ReduceSum", "Max": "ReduceMax", "Min": "ReduceMin", "Prod": "ReduceProd"}


def reduce(em: Emitter, op: str, x: Node, red, keepdims: int = 0) -> Value:
    """`op` over the axes `red` of x, where x's value holds them (a Sum over an axis x is
    broadcast along is materialised first); `keepdims` leaves them as units (for a Conv or a
    pooling that reads the result in its operand's rank)."""
    red = [a for a in red if a.length > 1 or a in em.values[x].dims]
    long = [a for a in red if a.length > 1]
    v = em.complete(x, long) if long and op != "ReduceMax" else em.values[x]
    if op in ("ReduceMax", "ReduceMin") and not all(v.full(a) for a in long):
        v = em.complete(x, long)
    # unit dimensions of axes x does not have go too (a 1x1 map's leftovers)
    positions = [i for i, d in enumerate(v.dims)
                 if d in red or (d not in x.axes and v.shape[i] == 1)]
    if not positions:
        return v
    name = em.name_of(v)
    if x.dtype == np.bool_:  # ONNX reduces bools only from opset 20
        name = em.node("Cast", [name], to=elem_type(np.int32))
    if _global_pool(op, keepdims, v, positions, x.dtype):
        out = em.node("GlobalAveragePool", [name])
    elif op == "ReduceSum" or em.opset >= 18:
        out = em.node(op, [name, em.const(positions)], keepdims=keepdims)
    else:
        out = em.node(op, [name], axes=positions, keepdims=keepdims)
    if x.dtype == np.bool_:
        out = em.node("Cast", [out], to=elem_type(np.bool_))
    if keepdims:
        shape = tuple(1 if i in positions else s for i, s in enumerate(v.shape))
        return Value(v.dims, shape, out)
    keep = [i for i in range(len(v.dims)) if i not in positions]
    return Value(tuple(v.dims[i] for i in keep), tuple(v.shape[i] for i in keep), out)


def _global_pool(op: str, keepdims: int, v: Value, positions: list[int], dtype) -> bool:
    """A kept mean over every dimension after the first two is GlobalAveragePool (what a CNN's
    squeeze-excitation reads): onnxruntime runs it in its blocked NCHWc layout beside the
    convolutions, where a ReduceMean sends the value back to NCHW and in again."""
    return (op == "ReduceMean" and bool(keepdims) and len(v.dims) > 2
            and positions == list(range(2, len(v.dims)))
            and np.dtype(dtype) in (np.float16, np.float32, np.float64))


@layout_exporter(*_REDUCE)
def reduction(em: Emitter, n: Node) -> Value:
    return reduce(em, _REDUCE[n.op], n.args[0], n.attrs["reduction_axes"],
                  keepdims=int(n in em.window_read))


@layout_exporter("Softmax")
def _softmax(em: Emitter, n: Node) -> Value:
    """ONNX Softmax over one axis, at the position it has; over several, the primitive form
    with the statistics kept as length-1 dimensions."""
    x = n.args[0]
    red = list(n.attrs["normalization_axes"])
    v = em.complete(x, red)
    name = em.name_of(v)
    if len(red) == 1:
        return Value(v.dims, v.shape, em.node("Softmax", [name], axis=v.dims.index(red[0])))
    top = reduce(em, "ReduceMax", x, red, keepdims=1)
    e = em.node("Exp", [em.node("Sub", [name, top.name])])
    positions = [v.dims.index(a) for a in red]
    total = em.node("ReduceSum", [e, em.const(positions)], keepdims=1)
    return Value(v.dims, v.shape, em.node("Div", [e, total]))

@layout_exporter("Concat")
def _concat(em: Emitter, n: Node) -> Value:
    """ONNX Concat in the order its operands already share (the two halves of a rotary
    embedding, sliced before the heads are transposed), else in the node's own order: there
    each operand was transposed first (Llama 102 -> 110 nodes)."""
    pos, vals = n.attrs["position"], [em.values[a] for a in n.args]
    own = [[n.attrs["axis"] if d == arg.axes[pos] else d for d in v.dims]
           for v, arg in zip(vals, n.args)]
    shared = all(o == own[0] and all(v.full(a) for a in arg.axes)
                 for o, v, arg in zip(own, vals, n.args))
    if not shared or len(own[0]) != len(n.axes) or set(own[0]) != set(n.axes):
        return full_value(em.node("Concat", [em.exact(a) for a in n.args], axis=pos), n.axes)
    order = [n.axes[n.axes.index(d)] for d in own[0]]
    return full_value(em.node("Concat", [em.name_of(v) for v in vals],
                              axis=order.index(n.attrs["axis"])), order)


#: Imported by the exporter, which needs these ops registered.
LOADED = True
