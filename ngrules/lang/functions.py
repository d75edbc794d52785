"""The function library that guards, lets and replacements may call, as one table.

Rules never run Python text: a call `f(x)` looks `f` up here. Pure functions compute values
(`len`, `size`, `new_axis`...); builders make graph nodes through `ngrules.ir.builders` (imported
when first called, so the table loads without the graph code). Python code adds functions
with `register_function`, the only escape hatch of the language.
"""

from __future__ import annotations

import builtins
import inspect
from collections.abc import Callable
from typing import Any

from ngrules.errors import NgrulesError
from ngrules.ir.axes import Axis, make_axes, make_axis
from ngrules.ir.graph import Node
from ngrules.ir.symbolic import STAND_INS, known
from ngrules.ir.values import known_scalar, scalar_value
from ngrules.lang.bounds import power
from ngrules.lang.kinds import is_constant, is_scalar
from ngrules.records import frozen


@frozen
class FunctionDef:
    """A callable the rules language knows by name, with its arity for the checker."""

    name: str
    fn: Callable[..., Any]
    min_args: int
    max_args: int | None
    doc: str = ""
    kind: str = "pure"  # "pure" computes a value, "builder" makes graph nodes
    #: The result is within the bounds of `bounds` by construction (a count, a bool, a float
    #: of a node, axes): the generated clauses skip the check. Registered functions are not.
    bounded: bool = False

    def signature(self) -> inspect.Signature | None:
        """The Python signature, when it can be read (used to check keyword arguments)."""
        try:
            return inspect.signature(self.fn)
        except (TypeError, ValueError):
            return None


class _Builder:
    """A front-end builder, resolved from `ngrules.ir.builders` at first use."""

    def __init__(self, name: str):
        self.name = name

    def target(self) -> Callable[..., Any]:
        from ngrules.ir import builders

        return getattr(builders, self.name)

    def __call__(self, *args, **kwargs):
        return self.target()(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.target())


class _NumberOrReduction:
    """`max`/`min` in rules: of numbers, the largest/smallest; of a node (or with keywords),
    ngraph's reduction `max(x, reduction_axes=...)` -- never silently the other."""

    def __init__(self, name: str, pick: Callable[..., Any]):
        self.reduction, self.pick = _Builder(name), pick

    def __call__(self, *args, **kwargs):
        if kwargs or any(isinstance(a, Node) for a in args):
            return self.reduction(*args, **kwargs)
        return self.pick(*args)

    @property
    def __signature__(self) -> inspect.Signature:
        return self.reduction.__signature__


# -- pure functions ------------------------------------------------------------------------------
def size_of(x) -> int:
    """Number of elements: of a node's axes, of an Axes, or the length of an Axis."""

    if x.__class__ is Node:  # the message written only if it is needed (a repr costs)
        return known(x.axes.size, lambda: f"the size of {x!r}") if STAND_INS else x.axes.size
    if isinstance(x, Axis):
        return known(x.length, f"the length of axis {x.name}")
    axes = getattr(x, "axes", None) if not isinstance(x, (tuple, list)) else None
    axes = make_axes(axes if axes is not None else x)
    return known(axes.size, lambda: f"the size of {axes!r}")


def value_of(node) -> float:
    """The one value of a known constant (the rules' `value`; also inlined by `exprgen`)."""
    value = known_scalar(node) if node.__class__ is Node else scalar_value(node)
    if value is None:
        raise NgrulesError(f"{node.op} is not a constant with one value everywhere")
    return value


def _new_axis(length: int, name: str | None = None):

    return make_axis(length, name)


def _make_axes(axes=()):

    return make_axes(axes)


def _flatten_axes(axes):

    return make_axes(axes).flatten(force=True)


def _index_of(axes, axis) -> int:
    """The position of an axis in an Axes: where an axis of one tensor sits in another's."""
    found = make_axes(axes)
    if axis not in found:
        raise NgrulesError(f"index_of: {axis!r} is not one of {found!r}")
    return found.index(axis)


def _attribute(node, name: str):
    """An op attribute by name, also one a node property shadows (a LayerNorm's `axes`)."""
    attrs = getattr(node, "attrs", None)
    if attrs is None or name not in attrs:
        op = getattr(node, "op", type(node).__name__)
        raise NgrulesError(f"{op} has no attribute {name!r}")
    return attrs[name]


def _is_scalar(node) -> bool:

    return is_scalar(node)


def _is_constant(node) -> bool:

    return is_constant(node)


_PURE: list[tuple[str, Callable, int, int | None, str]] = [
    ("len", builtins.len, 1, 1, "number of items: axes in an Axes, items in a tuple"),
    ("size", size_of, 1, 1, "number of elements of a node, an Axes, or an Axis's length"),
    (
        "min",
        _NumberOrReduction("min", builtins.min),
        1,
        None,
        "the smallest number, or min(x, reduction_axes=...) of a node",
    ),
    (
        "max",
        _NumberOrReduction("max", builtins.max),
        1,
        None,
        "the largest number, or max(x, reduction_axes=...) of a node",
    ),
    ("abs", builtins.abs, 1, 1, "absolute value"),
    ("pow", power, 2, 2, "a to the power b: exact for integers, IEEE for floats (inf on overflow)"),
    ("attribute", _attribute, 2, 2, "a node's op attribute by name, as `attribute(ln, \"axes\")`"),
    ("is_scalar", _is_scalar, 1, 1, "the node has no axes"),
    ("is_constant", _is_constant, 1, 1, "the node's values are known (through views)"),
    ("value", value_of, 1, 1, "the one value a known constant holds everywhere"),
    ("new_axis", _new_axis, 1, 2, "a fresh axis of the given length (and optional name)"),
    ("make_axes", _make_axes, 0, 1, "an Axes from an Axis or a tuple of axes"),
    ("flatten_axes", _flatten_axes, 1, 1, "one FlattenedAxis standing for the given axes"),
    ("index_of", _index_of, 2, 2, "the position of an axis in an Axes (an error if absent)"),
]

_REDUCE = "over `reduction_axes` (or down to `out_axes`)"

#: name, min and max positional arguments, doc: the front-end builders rules may call.
_BUILDERS: list[tuple[str, int, int, str]] = [
    ("broadcast", 2, 2, "x repeated along the new axes of `axes`"),
    ("axes_with_order", 2, 2, "x with its axes permuted into the order of `axes`"),
    ("transpose", 1, 1, "x with its axes reversed"),
    ("flatten", 1, 2, "x with all its axes flattened into one (or grouped as `axes`)"),
    ("flatten_at", 2, 2, "x as two axes: those before idx flattened, and those from idx on"),
    ("unflatten", 1, 2, "x with its flattened axes expanded by one level"),
    ("dot", 2, 2, "contract every axis x and y share"),
    ("sum", 1, 3, f"sum {_REDUCE}"),
    ("argmax", 1, 4, f"integer positions of the maximum {_REDUCE}"),
    ("argmin", 1, 4, f"integer positions of the minimum {_REDUCE}"),
    ("prod", 1, 3, f"product {_REDUCE}"),
    ("mean", 1, 3, f"mean {_REDUCE}: a Divide of a Sum, as in ngraph"),
    ("variance", 1, 3, f"biased variance {_REDUCE}"),
    ("negative", 1, 1, "-x"),
    ("reciprocal", 1, 1, "1 / x"),
    ("sqrt", 1, 1, "square root"),
    ("square", 1, 1, "x * x"),
    ("exp", 1, 1, "e ** x"),
    ("log", 1, 1, "natural logarithm"),
    ("tanh", 1, 1, "hyperbolic tangent"),
    ("sigmoid", 1, 1, "1 / (1 + exp(-x))"),
    ("erf", 1, 1, "the error function"),
    ("power", 2, 2, "x ** y with ngraph's broadcasting"),
    ("absolute", 1, 1, "|x|"),
    ("sign", 1, 1, "-1, 0 or 1 by the sign of x"),
    ("equal", 2, 2, "x == y as a bool tensor, broadcasting"),
    ("not_equal", 2, 2, "x != y as a bool tensor, broadcasting"),
    ("greater", 2, 2, "x > y as a bool tensor, broadcasting"),
    ("less", 2, 2, "x < y as a bool tensor, broadcasting"),
    ("greater_equal", 2, 2, "x >= y as a bool tensor, broadcasting"),
    ("less_equal", 2, 2, "x <= y as a bool tensor, broadcasting"),
    ("where", 3, 3, "x where cond, else y (cond a bool tensor)"),
    ("cast", 2, 2, "x converted to a dtype"),
    ("safelog", 1, 2, "log(x + exp(-50)) clipped at -50, as ngraph"),
    ("cross_entropy_multi", 2, 6, "-sum(safelog(y) * t), ngraph's softmax form when y is one"),
    ("cross_entropy_binary", 2, 6, "binary cross-entropy, ngraph's sigmoid form when y is one"),
    ("one_hot", 2, 3, "integer indices as one-hot vectors along a new leading axis"),
    ("tensor_slice", 2, 3, "x sliced by one int or slice per axis"),
    ("pad", 2, 3, "x with zeros around each axis"),
    ("expand_dims", 3, 3, "x repeated along a new axis at a position"),
    ("cast_axes", 2, 2, "x with new axes of the same lengths"),
    ("concat_along_axis", 2, 2, "join tensors along the named axis"),
    ("softmax", 1, 2, "softmax over `normalization_axes` (default: all but N and REC)"),
    ("add", 2, 2, "x + y with ngraph's broadcasting"),
    ("subtract", 2, 2, "x - y with ngraph's broadcasting"),
    ("multiply", 2, 2, "x * y with ngraph's broadcasting"),
    ("divide", 2, 2, "x / y with ngraph's broadcasting"),
    ("maximum", 2, 2, "elementwise maximum, broadcasting"),
    ("minimum", 2, 2, "elementwise minimum, broadcasting"),
    ("constant", 1, 3, "a known tensor: constant(value, axes=())"),
]

#: Pure functions whose result cannot exceed the bounds (see `FunctionDef.bounded`).
_BOUNDED = frozenset(
    {"len", "size", "is_scalar", "is_constant", "value", "new_axis", "make_axes", "flatten_axes",
     "index_of"}
)

FUNCTIONS: dict[str, FunctionDef] = {
    name: FunctionDef(name, fn, lo, hi, doc, bounded=name in _BOUNDED)
    for name, fn, lo, hi, doc in _PURE
}
FUNCTIONS.update(
    (name, FunctionDef(name, _Builder(name), lo, hi, doc, kind="builder"))
    for name, lo, hi, doc in _BUILDERS
)
#: The functions ngrules defines (its code decides them), as against those registered later.
BUILT_IN: dict[str, FunctionDef] = dict(FUNCTIONS)


def _arity_of(fn: Callable) -> tuple[int, int | None]:
    """(minimum, maximum) positional arguments, read from the signature ((0, None) if unknown)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 0, None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(1 for p in positional if p.default is p.empty)
    variadic = any(p.kind == p.VAR_POSITIONAL for p in params)
    return required, None if variadic else len(positional)


def register_function(
    name: str,
    fn: Callable[..., Any],
    *,
    arity: int | tuple[int, int | None] | None = None,
    doc: str = "",
) -> FunctionDef:
    """Make a Python function callable from rules as `name(...)`.

    arity: a count, a (min, max) pair (max None for any), or None to read the signature.
    """
    from ngrules.lang.parser import KEYWORDS

    if not isinstance(name, str) or not name.isidentifier() or not name.isascii():
        raise NgrulesError(f"function name {name!r} is not an identifier")
    if name in KEYWORDS:
        raise NgrulesError(f"function name {name!r} is a keyword of the rules language")
    if name[0].isupper():
        raise NgrulesError(
            f"function name {name!r} starts with a capital; capitalised names are ops"
        )
    if name in FUNCTIONS:
        raise NgrulesError(f"a function named {name!r} is already registered")
    if not callable(fn):
        raise NgrulesError(f"register_function({name!r}, ...) needs a callable, got {fn!r}")
    if arity is None:
        lo, hi = _arity_of(fn)
    elif isinstance(arity, int):
        lo, hi = arity, arity
    else:
        lo, hi = arity
    FUNCTIONS[name] = FunctionDef(name, fn, lo, hi, doc or (fn.__doc__ or "").strip())
    return FUNCTIONS[name]
