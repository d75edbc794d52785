"""The front end, in ngraph-python's spelling: builders that make graph nodes.

Elementwise builders follow ngraph's broadcasting rule: the output axes are y's when y has every
axis of x, else x's axes followed by y's extra ones; both operands are then broadcast (and
reordered) to the output axes, so the elementwise op itself sees equal axes. Python numbers mix
with nodes and take the other operand's dtype.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from ngrules.errors import NgrulesError, OpError
from ngrules.ir.axes import Axes, AxesLike, flatten_groups, make_axes
from ngrules.ir.graph import OPERATORS, Node, make_node, toposort
from ngrules.ir.ops import get_op
from ngrules.ir.symbolic import known

_fresh_names = itertools.count()

Operand = Node | float | int


# -- leaves ------------------------------------------------------------------------------------
def placeholder(axes: AxesLike, dtype=np.float32, name: str | None = None) -> Node:
    """An input tensor, fed by node or by name at execution."""
    name = name if name is not None else f"placeholder_{next(_fresh_names)}"
    return make_node("Placeholder", name=name, axes=make_axes(axes), dtype=dtype)


def variable(axes: AxesLike, dtype=np.float32, name: str | None = None, initial: float = 0.0,
             initial_value=None) -> Node:
    """A trainable tensor: fed like a placeholder, or holding its initial value, which is
    `initial` everywhere or `initial_value` (ngraph's name): a number, an array of the axes'
    shape, or a node computed from constants alone (evaluated now)."""
    name = name if name is not None else f"variable_{next(_fresh_names)}"
    value = initial if initial_value is None else initial_value
    if isinstance(value, Node):
        value = _value_now(value)
    value = np.asarray(value, dtype=dtype)
    return make_node("Variable", name=name, axes=make_axes(axes), dtype=dtype, initial=value)


def _value_now(node: Node) -> np.ndarray:
    """The value of a node that needs no feeds (a variable's initial value)."""
    from ngrules.ir.executor import execute

    try:
        return execute([node], {})[0]
    except NgrulesError as e:
        raise OpError(f"an initial value must be computable from constants: {e.message}") from None


def constant(value, axes: AxesLike = (), dtype=None) -> Node:
    """A known tensor; a scalar given non-empty axes becomes a broadcast scalar constant.
    Without `dtype`: a float array keeps its dtype (float64 stays float64), anything else is
    float32 (ngraph's default); beside a tensor of another float dtype it takes that one."""
    axes = make_axes(axes)
    if dtype is None:
        kept = isinstance(value, np.ndarray) and value.dtype.kind == "f"
        dtype = value.dtype if kept else np.float32
    with np.errstate(over="ignore"):  # a value beyond the dtype's range is inf, as in IEEE
        array = np.asarray(value, dtype=dtype)
    if array.ndim == 0 and len(axes):
        return broadcast(make_node("Constant", value=array, axes=()), axes)
    return make_node("Constant", value=array, axes=axes)


# -- views -------------------------------------------------------------------------------------
def broadcast(x: Node, axes: AxesLike) -> Node:
    """x repeated along the new axes of `axes` (x itself when its axes are already `axes`)."""
    axes = make_axes(axes)
    if x.axes == axes:
        return x
    return make_node("Broadcast", (x,), axes=axes)


def axes_with_order(x: Node, axes: AxesLike) -> Node:
    """x with its axes permuted into the order of `axes` (x itself if already so)."""
    axes = make_axes(axes)
    if x.axes == axes:
        return x
    return make_node("ReorderAxes", (x,), axes=axes)


def transpose(x: Node) -> Node:
    return make_node("Transpose", (x,))


def flatten(x: Node, axes: AxesLike | None = None) -> Node:
    """x with its axes grouped as `axes` (default: all into one flattened axis)."""
    if axes is None:
        if len(x.axes) <= 1:
            return x
        axes = Axes((x.axes.flatten(),))
    axes = make_axes(axes)
    if x.axes == axes:
        return x
    return make_node("Flatten", (x,), axes=axes)


def flatten_at(x: Node, idx: int) -> Node:
    """x as two axes: the axes before idx flattened, and those from idx on (ngraph's rule)."""
    if idx in (0, len(x.axes)):
        return flatten(x)
    return flatten(x, flatten_groups(x.axes, (idx, len(x.axes) - idx)))


def unflatten(x: Node, axes: AxesLike | None = None) -> Node:
    """x with its flattened axes expanded (by one level unless `axes` says otherwise)."""
    axes = x.axes.unflatten() if axes is None else make_axes(axes)
    if x.axes == axes:
        return x
    return make_node("Unflatten", (x,), axes=axes)


# -- elementwise -------------------------------------------------------------------------------
def _with_number(node: Node, value: Operand) -> tuple[Node, Node]:
    """A node beside a Python number, promoted as ngraph does so no value is lost: a float
    beside an integer tensor makes both float32 (`0.5 * x` of uint32 x = 1 is 0.5); an integer
    takes the tensor's dtype and must fit it; a number beside a bool mask is float32."""
    if isinstance(value, Node):
        return node, value
    if not isinstance(value, (int, float, np.number)) or isinstance(value, (bool, np.bool_)):
        raise OpError(f"cannot combine a node with {type(value).__name__} {value!r}")
    fractional = isinstance(value, (float, np.floating))
    if node.dtype == np.bool_:
        return node, constant(value, dtype=np.float32)
    if node.dtype.kind in "iu" and fractional:
        return make_node("Cast", (node,), dtype=np.dtype(np.float32)), constant(value)
    if node.dtype.kind in "iu":
        info = np.iinfo(node.dtype)
        if not info.min <= int(value) <= info.max:
            raise OpError(f"{value} does not fit {node.dtype.name} (the other operand's dtype; "
                          f"it holds {info.min}..{info.max}): cast the tensor first")
    return node, constant(value, dtype=node.dtype)


def elementwise_axes(x: Axes, y: Axes) -> Axes:
    """ngraph's rule: y's axes if they include all of x's, else x's followed by y's extra."""
    if y.is_super_set(x):
        return y
    return x + (y - x)


def _recast(node: Node, dtype) -> Node | None:
    """A computation on constants alone built again from its constants in `dtype` (as if
    they had been made so: the same ops, which rules see), else None (feeds or variables
    reach it, or an op refuses the dtype)."""
    order = toposort([node])
    if any(not n.args and n.op != "Constant" for n in order):
        return None
    memo: dict[Node, Node] = {}
    try:
        for n in order:
            if n.op == "Constant":
                memo[n] = constant(n.attrs["value"], n.axes, dtype)
            else:
                memo[n] = make_node(n.op, tuple(memo[a] for a in n.args), **(n.attrs or {}))
    except NgrulesError:
        return None
    return memo[node] if memo[node].dtype == dtype else None


def _float_agreeing(x: Node, y: Node) -> tuple[Node, Node]:
    """A float constant beside a tensor of another float dtype takes the tensor's dtype, as a
    number does (`ng.constant(np.ones(4))`, float64, beside a float32 tensor is float32)."""
    if x.dtype == y.dtype or x.dtype.kind != "f" or y.dtype.kind != "f":
        return x, y
    y2 = _recast(y, x.dtype)
    if y2 is not None:
        return x, y2
    x2 = _recast(x, y.dtype)
    return (x2, y) if x2 is not None else (x, y)


def _binary(op: str, x: Operand, y: Operand) -> Node:
    if x.__class__ is not Node or y.__class__ is not Node or x.dtype != y.dtype:
        # (two nodes of one dtype, the commonest operands, are what these return them as)
        if isinstance(x, Node):
            x, y = _with_number(x, y)
        elif isinstance(y, Node):
            y, x = _with_number(y, x)
        else:
            raise OpError(f"{op} needs at least one node operand")
        x, y = _float_agreeing(x, y)
    out = elementwise_axes(x.axes, y.axes)
    return make_node(op, (broadcast(x, out), broadcast(y, out)))


def apply_op(op: str, args: Sequence[Operand], attrs: dict | None = None) -> Node:
    """`op(args, attrs)`, with numbers and ngraph's broadcasting allowed for elementwise ops."""
    opdef = get_op(op)
    if opdef.has("elementwise") and len(args) == 2 and not attrs:
        return _binary(op, *args)
    return make_node(op, args, **(attrs or {}))


def add(x: Operand, y: Operand) -> Node:
    return _binary("Add", x, y)


def subtract(x: Operand, y: Operand) -> Node:
    return _binary("Subtract", x, y)


def multiply(x: Operand, y: Operand) -> Node:
    return _binary("Multiply", x, y)


def divide(x: Operand, y: Operand) -> Node:
    return _binary("Divide", x, y)


def maximum(x: Operand, y: Operand) -> Node:
    return _binary("Maximum", x, y)


def minimum(x: Operand, y: Operand) -> Node:
    return _binary("Minimum", x, y)


def negative(x: Node) -> Node:
    return make_node("Negative", (x,))


def reciprocal(x: Node) -> Node:
    return make_node("Reciprocal", (x,))


def sqrt(x: Node) -> Node:
    return make_node("Sqrt", (x,))


def square(x: Node) -> Node:
    return make_node("Square", (x,))


def exp(x: Node) -> Node:
    return make_node("Exp", (x,))


def log(x: Node) -> Node:
    return make_node("Log", (x,))


def tanh(x: Node) -> Node:
    return make_node("Tanh", (x,))


# -- reductions and products -------------------------------------------------------------------
def _reduce(op: str, x: Node, reduction_axes, out_axes, **attrs) -> Node:
    """ngraph's reduction: give reduction_axes or out_axes (default: all but N and REC)."""
    if reduction_axes is not None and out_axes is not None:
        red, out = make_axes(reduction_axes), make_axes(out_axes)
        if (red & out) or not (red | out).is_equal_set(x.axes):
            raise OpError(f"{op}: reduction {red!r} and output {out!r} must split {x.axes!r}")
    elif out_axes is not None:
        out = make_axes(out_axes)
        red = x.axes - out
    elif reduction_axes is not None:
        red = make_axes(reduction_axes)
        out = x.axes - red
    else:
        red = Axes(a for a in x.axes if not (a.is_batch or a.is_recurrent))
        out = x.axes - red
    if not len(red) and not attrs:
        return axes_with_order(x, out)
    node = make_node(op, (x,), reduction_axes=red, **attrs)
    return axes_with_order(node, out)


def sum(x: Node, reduction_axes=None, out_axes=None) -> Node:  # noqa: A001 - ngraph's name
    return _reduce("Sum", x, reduction_axes, out_axes)


def max(x: Node, reduction_axes=None, out_axes=None) -> Node:  # noqa: A001
    return _reduce("Max", x, reduction_axes, out_axes)


def min(x: Node, reduction_axes=None, out_axes=None) -> Node:  # noqa: A001
    return _reduce("Min", x, reduction_axes, out_axes)


def prod(x: Node, reduction_axes=None, out_axes=None) -> Node:
    return _reduce("Prod", x, reduction_axes, out_axes)


def argmax(x: Node, dtype=np.int32, reduction_axes=None, out_axes=None) -> Node:
    """Positions of the maximum over reduction_axes (flattened in x's order), as integers."""
    return _reduce("Argmax", x, reduction_axes, out_axes, dtype=dtype)


def argmin(x: Node, dtype=np.int32, reduction_axes=None, out_axes=None) -> Node:
    """Positions of the minimum over reduction_axes (flattened in x's order), as integers."""
    return _reduce("Argmin", x, reduction_axes, out_axes, dtype=dtype)


def mean(x: Node, reduction_axes=None, out_axes=None) -> Node:
    """Sum divided by the number of reduced elements (a Divide node, as in ngraph)."""
    total = sum(x, reduction_axes, out_axes)
    count = known(x.axes.size // total.axes.size, "the count of a mean")  # not symbolic
    return total / float(count)


def variance(x: Node, reduction_axes=None, out_axes=None) -> Node:
    """The biased variance: mean(square(x - mean(x)))."""
    centred = x - mean(x, reduction_axes, out_axes)
    return mean(square(centred), reduction_axes, out_axes)


def dot(x: Node, y: Node) -> Node:
    """Contract every axis x and y share; output axes (x - shared) + (y - shared)."""
    return make_node("Dot", _float_agreeing(x, y))


# -- fused ops ---------------------------------------------------------------------------------
def outputs_of(node: Node) -> tuple[Node, ...]:
    """The `Output` nodes of a multi-output node, in order."""
    return tuple(make_node("Output", (node,), index=i) for i in range(len(node.outputs)))


def batchnorm_fprop(x: Node, gamma: Node, beta: Node, eps: float = 1e-3):
    """Fused batch normalisation: (y, mean, var) over every axis of x but the first."""
    return outputs_of(make_node("BatchnormFprop", (x, gamma, beta), eps=eps))


def batchnorm_bprop(delta, x, gamma, mean_, var, eps: float = 1e-3):
    """Fused batchnorm backward: (dx, dgamma, dbeta)."""
    return outputs_of(make_node("BatchnormBprop", (delta, x, gamma, mean_, var), eps=eps))


OPERATORS.update(add=add, subtract=subtract, multiply=multiply, divide=divide, negative=negative)

