"""Slicing, padding and reversing (TensorSlice, Unslice, Pad, Reverse) and the axis views
ExpandDims and AxesCast.

A slice spec is an int array of shape (rank, 3), one row (start, stop, step) per input axis;
step 0 means "index `start`", which removes the axis (ngraph's `x[1]`). Sliced and padded axes
keep their names with new lengths, as in ngraph; `axes` gives the result's axes explicitly.
"""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import builders as F
from ngrules.ir import opgen as G
from ngrules.ir.axes import Axes
from ngrules.ir.graph import make_node
from ngrules.ir.ops import AttrSpec, register_op


def index_of(spec: np.ndarray) -> tuple:
    """The numpy index a slice spec stands for."""
    return tuple(int(a) if c == 0 else slice(int(a), int(b), int(c)) for a, b, c in spec)


def _sliced_lengths(op: str, spec: np.ndarray, full: Axes) -> tuple[int, ...]:
    """The lengths that slicing axes `full` by `spec` leaves (integer-indexed axes dropped)."""
    if spec.shape != (len(full), 3):
        raise OpError(f"{op}: need one (start, stop, step) row per axis of {full!r}")
    lengths = []
    for (start, stop, step), ax in zip(spec.tolist(), full):
        if step < 0 or not 0 <= start <= ax.length or (step == 0 and start >= ax.length):
            raise OpError(f"{op}: slice ({start}, {stop}, {step}) does not fit {ax!r}")
        if step:
            lengths.append(len(range(start, min(stop, ax.length), step)))
    return tuple(lengths)


def _check_lengths(op: str, axes: Axes, lengths) -> None:
    if axes.lengths != tuple(lengths):
        raise OpError(f"{op}: axes {axes!r} do not have the sliced lengths {tuple(lengths)}")


def _tensor_slice_infer(args, attrs):
    (x,), axes = args, attrs["axes"]
    _check_lengths("TensorSlice", axes, _sliced_lengths("TensorSlice", attrs["slices"], x.axes))
    return axes, x.dtype


def _unslice_infer(args, attrs):
    (x,), axes = args, attrs["axes"]
    _check_lengths("Unslice", x.axes, _sliced_lengths("Unslice", attrs["slices"], axes))
    return axes, x.dtype


def _tensor_slice_kernel(node):
    where = index_of(node.attrs["slices"])
    return lambda a: a[where]


def _unslice_kernel(node):
    where, shape = index_of(node.attrs["slices"]), node.axes.lengths

    def run(a):
        out = np.zeros(shape, a.dtype)
        out[where] = a
        return out

    return run


def _between(op: str):
    """The gradient of slicing is unslicing and back: the same spec, the argument's axes."""
    return lambda n, d: (make_node(op, (d,), slices=n.attrs["slices"], axes=n.args[0].axes),)


_SLICES = AttrSpec("slices", "array", doc="(start, stop, step) per input axis; step 0 indexes")
for _name, _infer, _kernel, _inverse, _gen, _doc in (
    ("TensorSlice", _tensor_slice_infer, _tensor_slice_kernel, "Unslice",
     G.leaf_args(G.gen_tensor_slice),
     "x[slices] (numpy basic indexing, steps >= 0), with result axes `axes`"),
    ("Unslice", _unslice_infer, _unslice_kernel, "TensorSlice",
     G.leaf_args(G.gen_unslice),
     "zeros of axes `axes` with x written at [slices] (the adjoint of TensorSlice)"),
):  # fmt: skip
    register_op(
        _name,
        arity=1,
        attrs=(_SLICES, AttrSpec("axes", "axes", doc="the result's axes")),
        infer=_infer,
        kernel=_kernel,
        grad=_between(_inverse),
        gen=_gen,
        doc=_doc,
    )


def pad_slices(paddings: np.ndarray, axes: Axes) -> np.ndarray:
    """The slice spec that takes a padded tensor of `axes` back to the unpadded one."""
    return np.array([(lo, ax.length - hi, 1) for (lo, hi), ax in zip(paddings.tolist(), axes)])


def _pad_infer(args, attrs):
    (x,), pads, axes = args, attrs["paddings"], attrs["axes"]
    if pads.shape != (len(x.axes), 2) or (pads < 0).any():
        raise OpError(f"Pad: need one (before, after) pair >= 0 per axis of {x.axes!r}")
    want = tuple(ax.length + int(lo) + int(hi) for ax, (lo, hi) in zip(x.axes, pads))
    _check_lengths("Pad", axes, want)
    return axes, x.dtype


def _pad_kernel(node):
    widths = [tuple(p) for p in node.attrs["paddings"].tolist()]
    return lambda a: np.pad(a, widths)


def _pad_grad(node, d):
    spec = pad_slices(node.attrs["paddings"], node.axes)
    return (make_node("TensorSlice", (d,), slices=spec, axes=node.args[0].axes),)


register_op(
    "Pad",
    arity=1,
    attrs=(
        AttrSpec("paddings", "array", doc="(before, after) zeros per axis"),
        AttrSpec("axes", "axes", doc="the result's axes"),
    ),
    infer=_pad_infer,
    kernel=_pad_kernel,
    grad=_pad_grad,
    gen=G.leaf_args(G.gen_pad),
    doc="x with zeros added before and after each axis",
)


def _reverse_infer(args, attrs):
    (x,), along = args, attrs["reverse_axes"]
    if not all(ax in x.axes for ax in along):
        raise OpError(f"Reverse: reverse_axes {along!r} are not all axes of {x.axes!r}")
    return x.axes, x.dtype


def _reverse_kernel(node):
    x, along = node.args[0], node.attrs["reverse_axes"]
    positions = tuple(x.axes.index(ax) for ax in along)
    return lambda a: np.flip(a, positions)


def _gen_reverse(draw, leaf):
    from hypothesis import strategies as st

    axes = G.some_axes(draw, G.axis_pool(draw), min_size=1)
    along = Axes(a for a in axes if draw(st.booleans()))
    return make_node("Reverse", (leaf(axes),), reverse_axes=along or axes[:1])


register_op(
    "Reverse",
    arity=1,
    attrs=(AttrSpec("reverse_axes", "axes", doc="the axes read backwards"),),
    infer=_reverse_infer,
    kernel=_reverse_kernel,
    grad=lambda n, d: (make_node("Reverse", (d,), reverse_axes=n.attrs["reverse_axes"]),),
    gen=_gen_reverse,
    doc="x with the order of its entries along each of `reverse_axes` reversed (XLA's rev)",
)


def _expand_infer(args, attrs):
    (x,), axis, pos = args, attrs["axis"], attrs["position"]
    if axis in x.axes or not 0 <= pos <= len(x.axes):
        raise OpError(f"ExpandDims: cannot insert {axis!r} at {pos} into {x.axes!r}")
    return x.axes[:pos] + Axes((axis,)) + x.axes[pos:], x.dtype


def _expand_kernel(node):
    pos, shape = node.attrs["position"], node.axes.lengths
    return lambda a: np.broadcast_to(np.expand_dims(a, pos), shape)


register_op(
    "ExpandDims",
    arity=1,
    attrs=(AttrSpec("axis", "axis"), AttrSpec("position", "int")),
    infer=_expand_infer,
    kernel=_expand_kernel,
    grad=lambda n, d: (F.sum(d, reduction_axes=Axes((n.attrs["axis"],))),),
    gen=G.leaf_args(G.gen_expand_dims),
    traits={"view"},
    doc="x repeated along the new `axis`, inserted at `position`",
)


def _axes_cast_infer(args, attrs):
    (x,), axes = args, attrs["axes"]
    if axes.lengths != x.axes.lengths:
        raise OpError(f"AxesCast: {axes!r} must have the lengths of {x.axes!r}")
    return axes, x.dtype


register_op(
    "AxesCast",
    arity=1,
    attrs=(AttrSpec("axes", "axes", doc="the new axes (same lengths)"),),
    infer=_axes_cast_infer,
    kernel=lambda node: lambda a: a,
    grad=lambda n, d: (make_node("AxesCast", (d,), axes=n.args[0].axes),),
    gen=G.leaf_args(G.gen_axes_cast),
    traits={"view"},
    doc="x with its axes renamed (ngraph's cast_axes): same values, same lengths",
)
