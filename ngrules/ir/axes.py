"""Named axes with ngraph's algebra.

An `Axis` is a name and a length; two axes are equal when their names are equal, as in ngraph.
A name used with two different lengths is an error wherever axes meet. `Axes` is an ordered,
immutable sequence of axes with distinct names. A `FlattenedAxis` stands for several axes laid
out as one; its name is derived from its components, so flattening the same axes twice gives the
same axis.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator
from typing import Union

from ngrules.errors import AxesError

_fresh = itertools.count()


class Axis:
    """A named dimension of a tensor."""

    __slots__ = ("name", "length")

    def __init__(self, name: str, length: int):
        if not isinstance(name, str) or not name:
            raise AxesError(f"an axis name must be a non-empty string, got {name!r}")
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise AxesError(f"axis {name!r} needs a positive integer length, got {length!r}")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "length", length)

    def __setattr__(self, key, value):
        raise AttributeError("axes are immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Axis) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"{self.name}:{self.length}"

    def __reduce__(self):
        return (Axis, (self.name, self.length))

    @property
    def is_flattened(self) -> bool:
        return False

    @property
    def axes(self) -> Axes:
        """The axes this axis stands for: itself, or a flattened axis's components."""
        return Axes((self,))

    @property
    def is_batch(self) -> bool:
        return self.name == "N"

    @property
    def is_recurrent(self) -> bool:
        return self.name == "REC"

    @property
    def is_channel(self) -> bool:
        return self.name == "C"

    def leaves(self) -> tuple[Axis, ...]:
        """The plain axes under any level of flattening, in layout order."""
        return (self,)

    def __add__(self, other: AxesLike) -> Axes:
        return Axes((self,)) + other

    def __radd__(self, other: AxesLike) -> Axes:
        return make_axes(other) + Axes((self,))


class FlattenedAxis(Axis):
    """Several axes laid out as one; length is the product of the components' lengths."""

    __slots__ = ("components",)

    def __init__(self, components: AxesLike):
        comps = make_axes(components)
        if len(comps) == 0:
            raise AxesError("cannot flatten an empty list of axes")
        name = "*".join(f"({a.name})" if a.is_flattened else a.name for a in comps)
        if len(comps) == 1:  # a flattening of one axis is not that axis (ngraph's force=True)
            name = f"({name})"
        super().__init__(name, comps.size)
        object.__setattr__(self, "components", comps)

    def __repr__(self) -> str:
        return f"({self.name}):{self.length}"

    def __reduce__(self):
        return (FlattenedAxis, (self.components,))

    @property
    def is_flattened(self) -> bool:
        return True

    @property
    def axes(self) -> Axes:
        return self.components

    def leaves(self) -> tuple[Axis, ...]:
        return tuple(leaf for a in self.components for leaf in a.leaves())


AxesLike = Union["Axes", Axis, Iterable[Axis], dict]


def _check_lengths(first: Axes, second: Axes) -> None:
    """Raise if an axis name appears in both with different lengths."""
    names, lengths = first._names, first._lengths
    for b in second._axes:
        if b.name in names and lengths[names.index(b.name)] != b.length:
            raise AxesError(
                f"axis {b.name!r} is used with two lengths: "
                f"{lengths[names.index(b.name)]} and {b.length}"
            )


def _subset(items: tuple[Axis, ...]) -> Axes:
    """Axes of some of a valid Axes' own axes, in order: nothing to check again (the algebra
    and slicing build many of these while rules are matched)."""
    axes = _new(Axes)
    _set_axes(axes, items)
    _set_names(axes, tuple([a.name for a in items]))
    _set_lengths(axes, tuple([a.length for a in items]))
    return axes


def is_difference(a: Axes, b: Axes, c: Axes) -> bool:
    """`a == b - c` without building `b - c` (checking lengths as the difference does)."""
    _check_lengths(b, c)
    names, kept = c._names, iter(a._names)
    for n in b._names:  # b's names not in c, in order, are a's (no tuple built)
        if n not in names and n != next(kept, None):
            return False
    return next(kept, None) is None


class Axes:
    """An ordered, immutable tuple of axes with distinct names."""

    __slots__ = ("_axes", "_names", "_lengths")

    def __init__(self, axes: Iterable[Axis] = ()):
        items = tuple(axes)
        for a in items:
            if not isinstance(a, Axis):
                raise AxesError(f"expected an Axis, got {a!r}")
        names = tuple([a.name for a in items])
        if len(set(names)) != len(names):
            seen: set[str] = set()
            dup = next(n for n in names if n in seen or seen.add(n))
            raise AxesError(f"axis {dup!r} appears twice in {list(names)}")
        _set_axes(self, items)  # the slots' setters (below): a third of the time
        _set_names(self, names)
        _set_lengths(self, tuple([a.length for a in items]))

    def __setattr__(self, key, value):
        raise AttributeError("Axes are immutable")

    def __reduce__(self):
        return (Axes, (self._axes,))

    # -- sequence protocol ------------------------------------------------------------------
    def __iter__(self) -> Iterator[Axis]:
        return iter(self._axes)

    def __len__(self) -> int:
        return len(self._axes)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return _subset(self._axes[index])
        return self._axes[index]

    def __contains__(self, axis: object) -> bool:
        return isinstance(axis, Axis) and axis.name in self._names

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Axes):
            return self._names == other._names
        if isinstance(other, (tuple, list)):
            return self._names == tuple(a.name for a in other if isinstance(a, Axis)) and all(
                isinstance(a, Axis) for a in other
            )
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._names)

    def __repr__(self) -> str:
        return "[" + ", ".join(repr(a) for a in self._axes) + "]"

    # -- ngraph's algebra -------------------------------------------------------------------
    def __add__(self, other: AxesLike) -> Axes:
        """Concatenation; a name in both operands is an error."""
        other = make_axes(other)
        shared = [a.name for a in other if a.name in self._names]
        if shared:
            raise AxesError(f"cannot concatenate axes {self} and {other}: both have {shared}")
        return Axes(self._axes + other._axes)

    def __radd__(self, other: AxesLike) -> Axes:
        return make_axes(other) + self

    def __sub__(self, other: AxesLike) -> Axes:
        """Ordered difference: the axes of self not in other, in self's order."""
        other = other if other.__class__ is Axes else make_axes(other)
        _check_lengths(self, other)
        names = other._names
        return _subset(tuple([a for a in self._axes if a.name not in names]))

    def __or__(self, other: AxesLike) -> Axes:
        """Ordered union: self, then the axes of other not already in self."""
        other = make_axes(other)
        _check_lengths(self, other)
        return Axes(self._axes + tuple(a for a in other if a.name not in self._names))

    def __and__(self, other: AxesLike) -> Axes:
        """Ordered intersection, in self's order."""
        other = other if other.__class__ is Axes else make_axes(other)
        _check_lengths(self, other)
        names = other._names
        return _subset(tuple([a for a in self._axes if a.name in names]))

    # -- queries ----------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    @property
    def lengths(self) -> tuple[int, ...]:
        return self._lengths

    @property
    def size(self) -> int:
        return math.prod(self._lengths)

    def index(self, axis: Axis | str) -> int:
        name = axis if isinstance(axis, str) else axis.name
        try:
            return self._names.index(name)
        except ValueError:
            raise AxesError(f"axis {name!r} is not in {self}") from None

    def find_by_name(self, name: str) -> Axes:
        return Axes(a for a in self._axes if a.name == name)

    def is_equal_set(self, other: AxesLike) -> bool:
        return set(self._names) == set(_names_of(other))

    def is_sub_set(self, other: AxesLike) -> bool:
        return set(self._names).issubset(_names_of(other))

    def is_super_set(self, other: AxesLike) -> bool:
        return set(self._names).issuperset(_names_of(other))

    def batch_axes(self) -> Axes:
        return Axes(a for a in self._axes if a.is_batch)

    def sample_axes(self) -> Axes:
        return Axes(a for a in self._axes if not a.is_batch and not a.is_recurrent)

    def leaves(self) -> tuple[Axis, ...]:
        """Every plain axis under any level of flattening, in layout order."""
        return tuple(leaf for a in self._axes for leaf in a.leaves())

    # -- flattening -------------------------------------------------------------------------
    def flatten(self, force: bool = False) -> Axis:
        """One axis standing for all of these: the axis itself when there is one and not force."""
        if len(self._axes) == 1 and not force:
            return self._axes[0]
        return FlattenedAxis(self)

    def unflatten(self) -> Axes:
        """Expand every flattened axis by one level."""
        return Axes(c for a in self._axes for c in a.axes)


def _names_of(axes: AxesLike) -> tuple[str, ...]:
    return axes._names if axes.__class__ is Axes else make_axes(axes).names


def make_axis(length: int, name: str | None = None) -> Axis:
    """A new axis; without a name it gets a fresh unique one (``Axis_<k>``)."""
    return Axis(name if name is not None else f"Axis_{next(_fresh)}", length)


def make_axes(axes: AxesLike = ()) -> Axes:
    """Axes from an Axes, an Axis, a list or tuple (nested lists flatten), or a {name: length}."""
    if isinstance(axes, Axes):
        return axes
    if isinstance(axes, Axis):
        return Axes((axes,))
    if isinstance(axes, dict):
        return Axes(Axis(name, length) for name, length in axes.items())
    if isinstance(axes, (str, bytes)):
        raise AxesError(f"expected axes, got the string {axes!r}")
    try:
        items = list(axes)
    except TypeError:
        raise AxesError(f"expected axes, got {axes!r}") from None
    return Axes(FlattenedAxis(a) if isinstance(a, (list, tuple)) else a for a in items)


def flatten_groups(axes: Axes, groups: Iterable[int]) -> Axes:
    """Flatten consecutive runs of `axes` of the given sizes (a group of one stays plain)."""
    out, start = [], 0
    for n in groups:
        out.append(axes[start : start + n].flatten())
        start += n
    if start != len(axes):
        raise AxesError(f"groups {list(groups)} do not cover {axes}")
    return Axes(out)


#: The slots' own setters (Axes refuses attribute assignment): `_subset` builds an Axes
#: with them, without `__init__`'s checks, twice as fast as `object.__setattr__`.
_new = object.__new__
_set_axes, _set_names, _set_lengths = (
    Axes._axes.__set__, Axes._names.__set__, Axes._lengths.__set__  # type: ignore[attr-defined]
)
