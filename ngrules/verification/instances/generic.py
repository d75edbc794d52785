"""Any op of the table at any pattern position, from the op's own generator and schema.

An op without a plan (`plans.py`) is built from a sample of its generator (`OpDef.gen`): every
axis of the sample is renamed into the instance (the output's axes onto the axes the position
needs, the others onto fresh names of the same lengths), its attributes follow the renaming, and
the pattern's arguments are built with the sample's argument axes. An output axis that the op
computes (a slice's length, a concatenation's sum) must come out at the needed length; a sample
for which it does not is redrawn a few times. Scalar attributes (floats, ints, strings, dtypes)
that a plan leaves open are taken from a generator sample too, so a `Relu` is built with the
slopes its generator draws, not only with its default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ngrules.errors import NgrulesError
from ngrules.ir.axes import Axes, Axis, FlattenedAxis
from ngrules.ir.graph import Node, make_node
from ngrules.ir.ops import OPS
from ngrules.verification.instances.choices import Reject

if TYPE_CHECKING:
    from ngrules.verification.instances.builder import Builder

#: How many generator samples are drawn for a position before giving up.
TRIES = 10
_SCALAR_KINDS = frozenset({"float", "int", "str", "dtype"})


def sample(b: Builder, op: str) -> Node:
    """One node of op from its generator, over stand-in placeholders of the builder's dtype."""

    def leaf(axes):
        return make_node("Placeholder", name="_gen", axes=axes, dtype=b.dtype)

    try:
        node = OPS[op].gen(b.draw, leaf)
    except NgrulesError as e:
        raise Reject(f"the generator of {op} failed: {e.message}") from None
    if node.op != op:
        raise Reject(f"the generator of {op} made a {node.op}")
    return node


def open_scalar_attrs(b: Builder, op: str, fixed: dict) -> dict:
    """Values for op's scalar attributes that `fixed` leaves open, from a generator sample."""
    wanted = [a.name for a in OPS[op].attrs if a.kind in _SCALAR_KINDS and a.name not in fixed]
    if not wanted:
        return fixed
    drawn = sample(b, op).attrs
    return {**{k: drawn[k] for k in wanted if k in drawn}, **fixed}


def _key(ax: Axis) -> tuple[str, int]:
    """An axis by name and length: a padded axis keeps its name but not its length."""
    return ax.name, ax.length


class _Renaming:
    """Sample axes -> instance axes: the output's onto `want`, the rest onto fresh names."""

    def __init__(self, b: Builder, out: Axes, want: Axes | None):
        self.b, self.map = b, {}
        if want is not None:
            for a, w in zip(out, want):
                self.map[_key(a)] = w

    def axis(self, ax: Axis) -> Axis:
        key = _key(ax)
        if key not in self.map:
            if isinstance(ax, FlattenedAxis):
                self.map[key] = FlattenedAxis(Axes(self.axis(c) for c in ax.components))
            else:
                name = next(self.b._axis_names, None)
                if name is None:
                    raise Reject("the instance needs more axes than there are names")
                self.map[key] = Axis(name, ax.length)
        return self.map[key]

    def axes(self, axes: Axes) -> Axes:
        return Axes(self.axis(a) for a in axes)

    def attr(self, value):
        if isinstance(value, Axis):
            return self.axis(value)
        if isinstance(value, Axes):
            return self.axes(value)
        return value


def _outputs(node: Node) -> list[Axes]:
    return [node.axes] if node.outputs is None else [ax for ax, _ in node.outputs]


def _fits(node: Node, want: Axes | None) -> tuple[int | None, str]:
    """The output of the sample that can be renamed onto want (its index), or None and why."""
    if want is None:
        return 0, ""
    passed = {_key(a) for arg in node.args for a in arg.axes}
    why = f"{node.op} came out with no output of {len(want)} axes"
    for i, out in enumerate(_outputs(node)):
        if len(out) != len(want):
            continue
        bad = [
            (a, w) for a, w in zip(out, want)
            if a.length != w.length
            and (_key(a) not in passed or a.is_flattened or w.is_flattened)
        ]
        if not bad:
            return i, ""
        (a, w), *_ = bad
        why = f"{node.op} computes an axis of length {a.length} where {w.length} is needed"
    return None, why


@dataclass
class Layout:
    """What a renamed sample gives: argument axes and dtypes, attributes, and which output
    has the axes asked for (0 for a single-output op)."""

    arg_axes: list
    attrs: dict
    dtypes: list
    index: int


def layout(b: Builder, op: str, want: Axes | None, n_args: int | None) -> Layout:
    """Argument axes, dtypes and attributes for an op node with an output of axes `want`
    (None: any), from a renamed generator sample."""
    why = ""
    for _ in range(TRIES):
        node = sample(b, op)
        index, why = _fits(node, want)
        if n_args is not None and len(node.args) != n_args:
            index, why = None, f"{op} was generated with {len(node.args)} arguments, not {n_args}"
        if index is not None:
            break
    else:
        raise Reject(why)
    names = _Renaming(b, _outputs(node)[index], want)
    arg_axes = [None if a.outputs is not None else names.axes(a.axes) for a in node.args]
    attrs = {k: names.attr(v) for k, v in node.attrs.items()}
    return Layout(arg_axes, attrs, _dtypes(node), index)


def _dtypes(node: Node) -> list:
    """Per argument, the dtype its leaves must have: None for the builder's float dtype, else
    the bool or integer dtype the generator gave it (a Select's condition, OneHot's indices)."""
    return [None if a.dtype.kind == "f" else a.dtype for a in node.args]


def arg_dtypes(b: Builder, op: str) -> list:
    """`_dtypes` of one generator sample of op, drawn once per instance and op; none drawn
    (every argument of the builder's float dtype) for a generator marked `opgen.leaf_args`."""
    if op not in b.arg_dtypes:
        leaves = getattr(OPS[op].gen, "leaf_args", False)
        b.arg_dtypes[op] = [] if leaves else _dtypes(sample(b, op))
    return b.arg_dtypes[op]
