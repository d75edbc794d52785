"""The built-in ops, each declared once: axes inference, numpy kernel, gradient, generator.

Semantics follow ngraph-python: elementwise operands carry exactly the output axes (the front
end inserts the broadcasts), `Dot` contracts every axis its operands share, reductions remove
`reduction_axes`, views only relayout. Kernels are factories: `kernel(node)` runs once when a
graph is compiled and returns the function applied to arrays.
"""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import frontend as F
from ngrules.ir import opgen as G
from ngrules.ir.axes import Axes, Axis, make_axis
from ngrules.ir.graph import make_node
from ngrules.ir.ops import AttrSpec, NotDifferentiable, register_op

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


# -- inference helpers -------------------------------------------------------------------------
def _dtype(op: str, args) -> np.dtype:
    """The common dtype of the arguments (all must agree)."""
    dtypes = {a.dtype for a in args}
    if len(dtypes) > 1:
        raise OpError(f"{op}: arguments mix dtypes {sorted(d.name for d in dtypes)}")
    return args[0].dtype


def _same_axes(a: Axes, b: Axes) -> bool:
    return a == b and a.lengths == b.lengths


def _subset(op: str, inner: Axes, outer: Axes, what: str) -> None:
    """Every axis of inner must be in outer, with the same length."""
    for ax in inner:
        if ax not in outer:
            raise OpError(f"{op}: {what} axis {ax!r} is not in {outer!r}")
        if outer[outer.index(ax)].length != ax.length:
            raise OpError(
                f"{op}: axis {ax.name!r} has length {ax.length} and {outer[outer.index(ax)].length}"
            )


def _elementwise_infer(op: str):
    def infer(args, attrs):
        first = args[0].axes
        for a in args[1:]:
            if not _same_axes(a.axes, first):
                raise OpError(f"{op}: operands have axes {first!r} and {a.axes!r}; broadcast first")
        return first, _dtype(op, args)

    return infer


def _no_grad(node, delta):
    return tuple(None for _ in node.args)


# -- leaves ------------------------------------------------------------------------------------
def _leaf_infer(args, attrs):
    dtype = attrs["dtype"]
    if dtype not in FLOATS:
        raise OpError(f"dtype must be float32 or float64, got {dtype}")
    return attrs["axes"], dtype


def _constant_infer(args, attrs):
    value, axes = attrs["value"], attrs["axes"]
    if value.shape != axes.lengths:
        raise OpError(f"Constant: value of shape {value.shape} does not fit axes {axes!r}")
    if value.dtype not in FLOATS:
        raise OpError(f"Constant: dtype must be float32 or float64, got {value.dtype}")
    return axes, value.dtype


def _needs_feed(node):
    def missing():
        raise OpError(f"placeholder {node.attrs['name']!r} needs a value")

    return missing


def _variable_kernel(node):
    value = np.full(node.axes.lengths, node.attrs["initial"], dtype=node.dtype)
    return lambda: value


def _constant_kernel(node):
    value = node.attrs["value"]
    return lambda: value


_NAME_AXES_DTYPE = (
    AttrSpec("name", "str", doc="the name feeds use"),
    AttrSpec("axes", "axes"),
    AttrSpec("dtype", "dtype", np.float32),
)

register_op(
    "Placeholder",
    arity=0,
    attrs=_NAME_AXES_DTYPE,
    infer=_leaf_infer,
    kernel=_needs_feed,
    grad=_no_grad,
    gen=G.gen_placeholder,
    traits={"leaf"},
    doc="an input fed at run time",
)
register_op(
    "Variable",
    arity=0,
    attrs=_NAME_AXES_DTYPE + (AttrSpec("initial", "float", 0.0),),
    infer=_leaf_infer,
    kernel=_variable_kernel,
    grad=_no_grad,
    gen=G.gen_variable,
    traits={"leaf"},
    doc="a trainable tensor; fed, or filled with `initial`",
)
register_op(
    "Constant",
    arity=0,
    attrs=(AttrSpec("value", "array"), AttrSpec("axes", "axes", ())),
    infer=_constant_infer,
    kernel=_constant_kernel,
    grad=_no_grad,
    gen=G.gen_constant,
    traits={"leaf"},
    doc="a known tensor value",
)


# -- elementwise -------------------------------------------------------------------------------
def _ufunc(fn):
    return lambda node: fn


def _compare(fn):
    def kernel(node):
        dtype = node.dtype
        return lambda a, b: fn(a, b).astype(dtype)

    return kernel


def _unary(name, fn, grad, doc, domain="real"):
    register_op(
        name,
        arity=1,
        infer=_elementwise_infer(name),
        kernel=_ufunc(fn),
        grad=grad,
        gen=G.gen_elementwise(name),
        traits={"elementwise"},
        domain=(domain,),
        doc=doc,
    )


def _binary(name, kernel, grad, doc, traits=(), domain=("real",)):
    register_op(
        name,
        arity=2,
        infer=_elementwise_infer(name),
        kernel=kernel,
        grad=grad,
        gen=G.gen_elementwise(name),
        traits={"elementwise", *traits},
        domain=domain,
        doc=doc,
    )


def _divide_grad(node, d):
    x, y = node.args
    return d / y, -(d * node / y)


def _maximum_grad(node, d):
    x, y = node.args
    dx = d * F.greater(x, y)
    return dx, d - dx


def _minimum_grad(node, d):
    x, y = node.args
    dx = d * F.less(x, y)
    return dx, d - dx


_binary("Add", _ufunc(np.add), lambda n, d: (d, d), "x + y", ("commutative", "associative"))
_binary("Subtract", _ufunc(np.subtract), lambda n, d: (d, -d), "x - y")
_binary(
    "Multiply",
    _ufunc(np.multiply),
    lambda n, d: (d * n.args[1], d * n.args[0]),
    "x * y",
    ("commutative", "associative"),
)
_binary("Divide", _ufunc(np.divide), _divide_grad, "x / y", domain=("real", "nonzero"))
_binary("Maximum", _ufunc(np.maximum), _maximum_grad, "max(x, y)", ("commutative", "associative"))
_binary("Minimum", _ufunc(np.minimum), _minimum_grad, "min(x, y)", ("commutative", "associative"))
_binary("Greater", _compare(np.greater), _no_grad, "1 where x > y, else 0")
_binary("Less", _compare(np.less), _no_grad, "1 where x < y, else 0")

_unary("Negative", np.negative, lambda n, d: (-d,), "-x")
_unary("Reciprocal", np.reciprocal, lambda n, d: (-(d * n * n),), "1 / x", "nonzero")
_unary("Sqrt", np.sqrt, lambda n, d: (d * 0.5 / n,), "square root", "positive")
_unary("Square", np.square, lambda n, d: (d * 2.0 * n.args[0],), "x * x")
_unary("Exp", np.exp, lambda n, d: (d * n,), "e ** x")
_unary("Log", np.log, lambda n, d: (d / n.args[0],), "natural logarithm", "positive")
_unary("Tanh", np.tanh, lambda n, d: (d * (1.0 - n * n),), "hyperbolic tangent")


# -- reductions --------------------------------------------------------------------------------
def _reduction_infer(name):
    def infer(args, attrs):
        (x,), red = args, attrs["reduction_axes"]
        _subset(name, red, x.axes, "reduction")
        return x.axes - red, x.dtype

    return infer


def _reduction_kernel(fn):
    def kernel(node):
        x = node.args[0]
        where = tuple(x.axes.index(a) for a in node.attrs["reduction_axes"])
        return lambda a: fn(a, axis=where)

    return kernel


def _sum_grad(node, d):
    return (F.broadcast(d, node.args[0].axes),)


def _extremum_grad(node, d):
    """Route the adjoint to the places that attain the extremum."""
    x = node.args[0]
    best = F.broadcast(node, x.axes)
    miss = F.less(x, best) if node.op == "Max" else F.greater(x, best)
    return (F.broadcast(d, x.axes) * (1.0 - miss),)


def _prod_grad(node, d):
    x = node.args[0]
    return (F.broadcast(d * node, x.axes) / x,)


for _name, _fn, _grad, _domain in (
    ("Sum", np.sum, _sum_grad, "real"),
    ("Max", np.max, _extremum_grad, "real"),
    ("Min", np.min, _extremum_grad, "real"),
    ("Prod", np.prod, _prod_grad, "nonzero"),
):
    register_op(
        _name,
        arity=1,
        attrs=(AttrSpec("reduction_axes", "axes"),),
        infer=_reduction_infer(_name),
        kernel=_reduction_kernel(_fn),
        grad=_grad,
        gen=G.gen_reduction(_name),
        traits={"reduction"},
        domain=(_domain,),
        doc=f"{_name.lower()} over reduction_axes",
    )


# -- products ----------------------------------------------------------------------------------
def _dot_infer(args, attrs):
    x, y = args
    red = x.axes & y.axes
    return (x.axes - red) + (y.axes - red), _dtype("Dot", args)


def _dot_kernel(node):
    """One matmul of (x_out, red) by (red, y_out) views: np.tensordot without its overhead."""
    x, y = node.args
    red = x.axes & y.axes
    x_out, y_out = x.axes - red, y.axes - red
    px = [x.axes.index(a) for a in x_out + red]
    py = [y.axes.index(a) for a in red + y_out]
    m, k, n, shape = x_out.size, red.size, y_out.size, node.axes.lengths
    return lambda a, b: np.matmul(
        a.transpose(px).reshape(m, k), b.transpose(py).reshape(k, n)
    ).reshape(shape)


def _dot_grad(node, d):
    x, y = node.args
    return F.axes_with_order(F.dot(d, y), x.axes), F.axes_with_order(F.dot(x, d), y.axes)


register_op(
    "Dot",
    arity=2,
    infer=_dot_infer,
    kernel=_dot_kernel,
    grad=_dot_grad,
    gen=G.gen_dot,
    derived={
        "reduction_axes": lambda n: n.args[0].axes & n.args[1].axes,
        "x_out_axes": lambda n: n.args[0].axes - n.args[1].axes,
        "y_out_axes": lambda n: n.args[1].axes - n.args[0].axes,
    },
    doc="contracts every axis x and y share; output (x - shared) + (y - shared)",
)


def _dld_infer(args, attrs):
    x, y = args
    if not (1 <= len(x.axes) <= 2 and 1 <= len(y.axes) <= 2):
        raise OpError(f"DotLowDimension takes 1-D or 2-D operands, got {x.axes!r} and {y.axes!r}")
    if x.axes.lengths[-1] != y.axes.lengths[0]:
        raise OpError(f"DotLowDimension: {x.axes!r} and {y.axes!r} do not contract")
    shape = x.axes.lengths[:-1] + y.axes.lengths[1:]
    if attrs["axes"].lengths != shape:
        raise OpError(f"DotLowDimension: output axes {attrs['axes']!r} do not have shape {shape}")
    return attrs["axes"], _dtype("DotLowDimension", args)


def _dld(a, b, axes):
    return make_node("DotLowDimension", (a, b), axes=axes)


def _outer(a, b, axes):
    unit = make_axis(1)
    return _dld(F.broadcast(a, a.axes + unit), F.broadcast(b, unit + b.axes), axes)


def _dld_grad(node, d):
    x, y = node.args
    ranks = (len(x.axes), len(y.axes))
    if ranks == (2, 2):
        return _dld(d, F.transpose(y), x.axes), _dld(F.transpose(x), d, y.axes)
    if ranks == (2, 1):
        return _outer(d, y, x.axes), _dld(F.transpose(x), d, y.axes)
    if ranks == (1, 2):
        return _dld(y, d, x.axes), _outer(x, d, y.axes)
    unit = make_axis(1)
    du = F.broadcast(d, Axes((unit,)))
    return _dld(F.broadcast(y, y.axes + unit), du, x.axes), _dld(
        F.broadcast(x, x.axes + unit), du, y.axes
    )


register_op(
    "DotLowDimension",
    arity=2,
    attrs=(AttrSpec("axes", "axes"),),
    infer=_dld_infer,
    kernel=lambda node: np.matmul,
    grad=_dld_grad,
    gen=G.gen_dot_low,
    doc="np.dot of 1-D/2-D operands, with explicit output axes",
)


# -- views -------------------------------------------------------------------------------------
def _broadcast_infer(args, attrs):
    (x,), axes = args, attrs["axes"]
    _subset("Broadcast", x.axes, axes, "operand")
    return axes, x.dtype


def _broadcast_kernel(node):
    x, out = node.args[0], node.axes
    perm = [x.axes.index(a) for a in out if a in x.axes]
    where = tuple(slice(None) if a in x.axes else None for a in out)
    shape = out.lengths
    return lambda a: np.broadcast_to(a.transpose(perm)[where], shape)


def _broadcast_grad(node, d):
    x = node.args[0]
    return (F.axes_with_order(F.sum(d, reduction_axes=node.axes - x.axes), x.axes),)


def _reorder_infer(args, attrs):
    (x,), axes = args, attrs["axes"]
    if not x.axes.is_equal_set(axes) or len(axes) != len(x.axes):
        raise OpError(f"ReorderAxes: {axes!r} is not a reordering of {x.axes!r}")
    _subset("ReorderAxes", x.axes, axes, "operand")
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
    gen=G.gen_broadcast,
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
    gen=G.gen_reorder,
    traits={"view"},
    doc="permute x's axes into the order `axes`",
)
register_op(
    "Transpose",
    arity=1,
    infer=lambda args, attrs: (args[0].axes[::-1], args[0].dtype),
    kernel=lambda node: np.transpose,
    grad=lambda n, d: (F.transpose(d),),
    gen=G.gen_elementwise("Transpose"),
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
    gen=G.gen_flatten,
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
    gen=G.gen_unflatten,
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
        if len(a.axes) != len(first) or not _same_axes(a.axes[:pos] + a.axes[pos + 1 :], rest):
            raise OpError(f"Concat: {a.axes!r} does not line up with {first!r} at position {pos}")
    total = sum(a.axes[pos].length for a in args)
    if axis.length != total or axis in rest:
        raise OpError(f"Concat: output axis {axis!r} must be new and of length {total}")
    return first[:pos] + Axes((axis,)) + first[pos + 1 :], _dtype("Concat", args)


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
    gen=G.gen_concat,
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
    gen=G.gen_slice,
    doc="the [start:stop] part of the axis at `position`, which becomes `axis`",
)


# -- fused leaky relu (ngraph's ReluOp and BpropReluOp) ------------------------------------------
def _slope_kernel(fn):
    def kernel(node):
        slope = node.attrs["slope"]
        return lambda *arrays: fn(slope, *arrays)

    return kernel


def _relu(slope, x):
    return np.where(x > 0, x, x * slope)


def _relu_bprop(slope, delta, x):
    return np.where(x > 0, delta, delta * slope)


def _relu_grad(node, d):
    return (make_node("ReluBprop", (d, node.args[0]), slope=node.attrs["slope"]),)


def _relu_bprop_grad(node, d):
    """Linear in delta; piecewise constant in x, so x's adjoint is zero (almost everywhere)."""
    return make_node("ReluBprop", (d, node.args[1]), slope=node.attrs["slope"]), None


_SLOPE = (AttrSpec("slope", "float", 0.0, "the gradient where x <= 0"),)
for _name, _arity, _fn, _grad, _doc in (
    ("Relu", 1, _relu, _relu_grad, "max(x, 0) + slope * min(0, x)"),
    ("ReluBprop", 2, _relu_bprop, _relu_bprop_grad, "delta where x > 0, slope * delta elsewhere"),
):
    register_op(
        _name,
        arity=_arity,
        attrs=_SLOPE,
        infer=_elementwise_infer(_name),
        kernel=_slope_kernel(_fn),
        grad=_grad,
        gen=G.gen_sloped(_name),
        traits={"elementwise", "fused"},
        doc=_doc,
    )


# -- multi-output and fused batchnorm -----------------------------------------------------------
def _output_infer(args, attrs):
    (t,), i = args, attrs["index"]
    if t.outputs is None:
        raise OpError(f"Output: {t.op} has a single output")
    if not 0 <= i < len(t.outputs):
        raise OpError(f"Output: {t.op} has {len(t.outputs)} outputs, no index {i}")
    return t.outputs[i]


register_op(
    "Output",
    arity=1,
    attrs=(AttrSpec("index", "int"),),
    infer=_output_infer,
    kernel=lambda node: lambda t, i=node.attrs["index"]: t[i],
    grad=NotDifferentiable("autodiff routes Output adjoints to its multi-output node"),
    gen=G.gen_output,
    doc="output `index` of a multi-output node",
)


def _channel_axes(name, x: Axis, *per_channel) -> Axes:
    channel = Axes((x.axes[0],))
    for a in per_channel:
        if not _same_axes(a.axes, channel):
            raise OpError(f"{name}: per-channel operand has axes {a.axes!r}, expected {channel!r}")
    return channel


def _bn_fprop_infer(args, attrs):
    x, gamma, beta = args
    if len(x.axes) < 2:
        raise OpError(f"BatchnormFprop needs a channel axis and at least one more, got {x.axes!r}")
    channel, dt = _channel_axes("BatchnormFprop", x, gamma, beta), _dtype("BatchnormFprop", args)
    return (x.axes, dt), (channel, dt), (channel, dt)


def _by_channel(x):
    """x as a [channel, everything else] matrix (a view when x's layout allows)."""
    return x.reshape(x.shape[0], -1)


def _row_dots(a, b):
    """Per-row dot products of two matrices, in one pass and without a temporary."""
    return np.einsum("ij,ij->i", a, b)


def _bn_fprop_kernel(node):
    eps = node.attrs["eps"]

    def run(x, gamma, beta):
        flat = _by_channel(x)
        mean = flat.mean(axis=1)
        centred = flat - mean[:, None]
        var = _row_dots(centred, centred) / flat.shape[1]
        centred *= (gamma / np.sqrt(var + eps))[:, None]  # y = xhat * gamma + beta, in place
        centred += beta[:, None]
        return centred.reshape(x.shape), mean, var

    return run


def _bn_bprop_kernel(node):
    eps = node.attrs["eps"]

    def run(delta, x, gamma, mean, var):
        flat, d = _by_channel(x), _by_channel(delta)
        m = flat.shape[1]
        inv = 1.0 / np.sqrt(var + eps)
        centred = flat - mean[:, None]
        dbeta = d.sum(axis=1)
        dgamma = _row_dots(d, centred) * inv  # sum(delta * xhat)
        # dx = gamma*inv*(delta - (xhat*dgamma + dbeta)/m) = a*delta + b*(x - mean) + c
        a = gamma * inv
        centred *= (-a * inv * dgamma / m)[:, None]
        centred += (-a * dbeta / m)[:, None]
        centred += d * a[:, None]
        return centred.reshape(x.shape).astype(x.dtype, copy=False), dgamma, dbeta

    return run


def _plus(total, term):
    return term if total is None else total + term


def _bn_fprop_grad(node, deltas):
    """Adjoints of (y, mean, var) back to (x, gamma, beta)."""
    x, gamma, beta = node.args
    dy, dmean, dvar = deltas
    mean, var = make_node("Output", (node,), index=1), make_node("Output", (node,), index=2)
    dx = dgamma = dbeta = None
    if dy is not None:
        bp = make_node("BatchnormBprop", (dy, x, gamma, mean, var), eps=node.attrs["eps"])
        dx, dgamma, dbeta = (make_node("Output", (bp,), index=i) for i in range(3))
    m = float(x.axes.size // x.axes[0].length)
    if dmean is not None:
        dx = _plus(dx, F.broadcast(dmean / m, x.axes))
    if dvar is not None:
        centred = x - F.broadcast(mean, x.axes)
        dx = _plus(dx, F.broadcast(dvar * (2.0 / m), x.axes) * centred)
    return dx, dgamma, dbeta


def _bn_bprop_infer(args, attrs):
    delta, x, gamma, mean, var = args
    if not _same_axes(delta.axes, x.axes) or len(x.axes) < 2:
        raise OpError(f"BatchnormBprop: delta {delta.axes!r} must have x's axes {x.axes!r}")
    channel = _channel_axes("BatchnormBprop", x, gamma, mean, var)
    dt = _dtype("BatchnormBprop", args)
    return (x.axes, dt), (channel, dt), (channel, dt)


_EPS = (AttrSpec("eps", "float", 1e-3, "added to the variance inside the square root"),)
register_op(
    "BatchnormFprop",
    arity=3,
    attrs=_EPS,
    infer=_bn_fprop_infer,
    kernel=_bn_fprop_kernel,
    grad=_bn_fprop_grad,
    gen=G.gen_bn_fprop,
    traits={"multi_output", "fused"},
    outputs=3,
    doc="(y, mean, var) of batch normalisation over every axis but the first (channel)",
)
register_op(
    "BatchnormBprop",
    arity=5,
    attrs=_EPS,
    infer=_bn_bprop_infer,
    kernel=_bn_bprop_kernel,
    grad=NotDifferentiable("second derivatives of batchnorm are not supported"),
    gen=G.gen_bn_bprop,
    traits={"multi_output", "fused"},
    outputs=3,
    domain=("real", "real", "real", "real", "positive"),
    doc="(dx, dgamma, dbeta) of batch normalisation from delta, x, gamma, mean, var",
)
