"""Views and relayouts (Broadcast, ReorderAxes, Transpose, Flatten, Unflatten), Concat and Slice."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import frontend as F
from ngrules.ir import opgen as G
from ngrules.ir.axes import Axes, make_axis
from ngrules.ir.builtin.common import check_subset, result_dtype, same_axes
from ngrules.ir.graph import make_node
from ngrules.ir.ops import AttrSpec, register_op


# -- views -------------------------------------------------------------------------------------
def _broadcast_infer(args, attrs):
    (x,), axes = args, attrs["axes"]
    check_subset("Broadcast", x.axes, axes, "operand")
    return axes, x.dtype


def _broadcast_kernel(node):
    """A read-only view. A C-contiguous array (the common case: a kernel's result) is viewed
    through strides built here (0 along the new axes), ten times cheaper than
    `np.broadcast_to`, which handles everything else."""
    x, out = node.args[0], node.axes
    perm = [x.axes.index(a) for a in out if a in x.axes]
    where = tuple(slice(None) if a in x.axes else None for a in out)
    shape = out.lengths
    source = [x.axes.index(a) if a in x.axes else None for a in out]  # x's axis for each

    def run(a):
        if a.__class__ is np.ndarray and a.flags.c_contiguous and a.size:
            steps = a.strides
            strides = tuple([0 if i is None else steps[i] for i in source])
            view = np.ndarray(shape, a.dtype, a, 0, strides)
            view.flags.writeable = False
            return view
        return np.broadcast_to(a.transpose(perm)[where], shape)

    return run


def _broadcast_grad(node, d):
    x = node.args[0]
    return (F.axes_with_order(F.sum(d, reduction_axes=node.axes - x.axes), x.axes),)


def _reorder_infer(args, attrs):
    (x,), axes = args, attrs["axes"]
    if not x.axes.is_equal_set(axes) or len(axes) != len(x.axes):
        raise OpError(f"ReorderAxes: {axes!r} is not a reordering of {x.axes!r}")
    check_subset("ReorderAxes", x.axes, axes, "operand")
    return axes, x.dtype


def _reorder_kernel(node):
    x = node.args[0]
    perm = [x.axes.index(a) for a in node.axes]
    return lambda a: a.transpose(perm)


def _relayout_infer(name):
    """Flatten and Unflatten keep the leaf axes and their order, grouping them differently."""

    def infer(args, attrs):
        (x,), axes = args, attrs["axes"]
        leaves = [(a.name, a.length) for a in axes.leaves()]
        if leaves != [(a.name, a.length) for a in x.axes.leaves()]:
            raise OpError(f"{name}: {axes!r} is not a regrouping of {x.axes!r}")
        return axes, x.dtype

    return infer


def _reshape_kernel(node):
    shape = node.axes.lengths
    return lambda a: a.reshape(shape)


def _relayout_grad(inverse):
    return lambda node, d: (make_node(inverse, (d,), axes=node.args[0].axes),)


register_op(
    "Broadcast",
    arity=1,
    attrs=(AttrSpec("axes", "axes"),),
    infer=_broadcast_infer,
    kernel=_broadcast_kernel,
    grad=_broadcast_grad,
    gen=G.leaf_args(G.gen_broadcast),
    traits={"view"},
    doc="repeat x along the new axes of `axes` (may also reorder)",
)
register_op(
    "ReorderAxes",
    arity=1,
    attrs=(AttrSpec("axes", "axes"),),
    infer=_reorder_infer,
    kernel=_reorder_kernel,
    grad=lambda n, d: (F.axes_with_order(d, n.args[0].axes),),
    gen=G.leaf_args(G.gen_reorder),
    traits={"view"},
    doc="permute x's axes into the order `axes`",
)
register_op(
    "Transpose",
    arity=1,
    infer=lambda args, attrs: (args[0].axes[::-1], args[0].dtype),
    kernel=lambda node: np.transpose,
    grad=lambda n, d: (F.transpose(d),),
    gen=G.leaf_args(G.gen_elementwise("Transpose")),
    traits={"view"},
    doc="reverse the axis order",
)
register_op(
    "Flatten",
    arity=1,
    attrs=(AttrSpec("axes", "axes"),),
    infer=_relayout_infer("Flatten"),
    kernel=_reshape_kernel,
    grad=_relayout_grad("Unflatten"),
    gen=G.leaf_args(G.gen_flatten),
    traits={"view"},
    doc="group consecutive axes into flattened axes",
)
register_op(
    "Unflatten",
    arity=1,
    attrs=(AttrSpec("axes", "axes"),),
    infer=_relayout_infer("Unflatten"),
    kernel=_reshape_kernel,
    grad=_relayout_grad("Flatten"),
    gen=G.leaf_args(G.gen_unflatten),
    traits={"view"},
    doc="split flattened axes back into their components",
)


# -- concatenation and slicing -----------------------------------------------------------------
def _concat_infer(args, attrs):
    if not args:
        raise OpError("Concat needs at least one argument")
    axis, pos = attrs["axis"], attrs["position"]
    first = args[0].axes
    if not 0 <= pos < len(first):
        raise OpError(f"Concat: position {pos} is outside {first!r}")
    rest = first[:pos] + first[pos + 1 :]
    for a in args[1:]:
        if len(a.axes) != len(first) or not same_axes(a.axes[:pos] + a.axes[pos + 1 :], rest):
            raise OpError(f"Concat: {a.axes!r} does not line up with {first!r} at position {pos}")
    total = sum(a.axes[pos].length for a in args)
    if axis.length != total or axis in rest:
        raise OpError(f"Concat: output axis {axis!r} must be new and of length {total}")
    return first[:pos] + Axes((axis,)) + first[pos + 1 :], result_dtype("Concat", args)


def _concat_kernel(node):
    pos = node.attrs["position"]
    return lambda *arrays: np.concatenate(arrays, axis=pos)


def _concat_grad(node, d):
    pos, start, out = node.attrs["position"], 0, []
    for a in node.args:
        ax = a.axes[pos]
        out.append(
            make_node("Slice", (d,), position=pos, start=start, stop=start + ax.length, axis=ax)
        )
        start += ax.length
    return tuple(out)


def _slice_infer(args, attrs):
    (x,), pos = args, attrs["position"]
    start, stop, axis = attrs["start"], attrs["stop"], attrs["axis"]
    if not 0 <= pos < len(x.axes):
        raise OpError(f"Slice: position {pos} is outside {x.axes!r}")
    if not 0 <= start < stop <= x.axes[pos].length or axis.length != stop - start:
        raise OpError(f"Slice: [{start}:{stop}] into axis {axis!r} does not fit {x.axes[pos]!r}")
    rest = x.axes[:pos] + x.axes[pos + 1 :]
    if axis in rest:
        raise OpError(f"Slice: output axis {axis!r} clashes with {rest!r}")
    return x.axes[:pos] + Axes((axis,)) + x.axes[pos + 1 :], x.dtype


def _slice_kernel(node):
    a = node.attrs
    where = (slice(None),) * a["position"] + (slice(a["start"], a["stop"]),)
    return lambda x: x[where]


def _slice_grad(node, d):
    """Pad the adjoint with zeros back to the sliced axis."""
    x, a = node.args[0], node.attrs
    pos, full = a["position"], x.axes[a["position"]]
    parts = []
    for length in (a["start"], full.length - a["stop"]):
        if length:
            ax = d.axes[:pos] + Axes((make_axis(length),)) + d.axes[pos + 1 :]
            parts.append(F.constant(0.0, ax, dtype=d.dtype))
    pieces = (
        ([parts[0]] if a["start"] else []) + [d] + (parts[-1:] if a["stop"] < full.length else [])
    )
    if len(pieces) == 1:
        return (make_node("Slice", (d,), position=pos, start=0, stop=full.length, axis=full),)
    return (make_node("Concat", tuple(pieces), axis=full, position=pos),)


register_op(
    "Concat",
    arity=None,
    attrs=(AttrSpec("axis", "axis"), AttrSpec("position", "int")),
    infer=_concat_infer,
    kernel=_concat_kernel,
    grad=_concat_grad,
    gen=G.leaf_args(G.gen_concat),
    doc="join along the axis at `position`, which becomes `axis`",
)
register_op(
    "Slice",
    arity=1,
    attrs=(
        AttrSpec("position", "int"),
        AttrSpec("start", "int"),
        AttrSpec("stop", "int"),
        AttrSpec("axis", "axis"),
    ),
    infer=_slice_infer,
    kernel=_slice_kernel,
    grad=_slice_grad,
    gen=G.leaf_args(G.gen_slice),
    doc="the [start:stop] part of the axis at `position`, which becomes `axis`",
)
