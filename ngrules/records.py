"""`@frozen`: `@dataclass(frozen=True)` as it behaves, made at a third of its import cost.

On Python 3.11 a frozen dataclass compiles six functions as its class is made (`__init__`,
`__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`), 0.45 ms per class: 17 ms of
every command's start for the records `import ngrules` makes (the syntax tree's nodes, the op
table's entries, spans...; issue 34). `frozen` has dataclasses compile only `__init__`; the
other five are functions shared by every record, reading its class's fields, and do what the
generated ones do: equal when of the same class with equal compared fields (compared as a
tuple, or from Python 3.13 one by one, as dataclasses there compares them); the hash of those
fields; the repr of the shown fields (`...` where it recurses); `FrozenInstanceError` on
assigning or deleting a field once it is set (its `__init__` sets each field once). Its
`__dataclass_params__` say `eq=False, frozen=False` (what dataclasses made): a dataclass that
extends a record is made with `@frozen` too.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Callable
from dataclasses import FrozenInstanceError
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T", bound=type)

#: What the shared methods are defined by, dataclasses' own names for these five.
SHARED = ("__setattr__", "__delattr__", "__eq__", "__hash__", "__repr__")


class _Shape(NamedTuple):
    """A record class's fields as its shared methods read them."""

    cls: type
    names: frozenset[str]
    set_by_init: frozenset[str]  # the fields `__init__` sets (not an init=False one's default)
    compared: Callable[[Any], tuple]
    shown: tuple[str, ...]


def frozen(cls: T) -> T:
    """`@dataclass(frozen=True)`: its `__init__` generated, the other five methods shared
    (see the module docstring); a class that defines one of those itself is refused."""
    own = [name for name in SHARED if name in cls.__dict__]
    if own:
        raise TypeError(f"{cls.__name__} defines {', '.join(own)}: use @dataclass")
    cls = dataclasses.dataclass(cls, eq=False, repr=False)  # compiles only __init__
    fields = dataclasses.fields(cls)
    cls._record_shape = _Shape(cls, frozenset(f.name for f in fields),
                               frozenset(f.name for f in fields if f.init
                                         or f.default_factory is not dataclasses.MISSING),
                               _getter(tuple(f.name for f in fields if f.compare)),
                               tuple(f.name for f in fields if f.repr))
    cls.__setattr__, cls.__delattr__ = _setattr, _delattr
    cls.__eq__, cls.__hash__, cls.__repr__ = _EQ, _hash, _repr
    return cls


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    """The tuple of these attributes of an object (what the generated `__eq__` compares)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda record: (one(record),)
    return lambda record: ()


def _setattr(self, name: str, value) -> None:
    shape = self._record_shape
    if name in shape.set_by_init and name not in self.__dict__:  # `__init__` setting it
        object.__setattr__(self, name, value)
    elif type(self) is shape.cls or name in shape.names:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")
    else:  # an attribute of a subclass that is not a record
        object.__setattr__(self, name, value)


def _delattr(self, name: str) -> None:
    shape = self._record_shape
    if type(self) is shape.cls or name in shape.names:
        raise FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


def _eq(self, other):
    if other.__class__ is self.__class__:
        compared = self._record_shape.compared
        return compared(self) == compared(other)
    return NotImplemented


def _eq_by_field(self, other):
    """Python 3.13's generated `__eq__`: a record equals itself; else the compared fields'
    `==` in turn, joined as `and` joins them (a NaN that two records both hold is unequal)."""
    if self is other:
        return True
    if other.__class__ is not self.__class__:
        return NotImplemented
    compared, equal = self._record_shape.compared, True
    for mine, theirs in zip(compared(self), compared(other)):
        equal = mine == theirs
        if not equal:
            break
    return equal


#: The `__eq__` of records: dataclasses' changed in Python 3.13 (fields compared in turn).
_EQ = _eq_by_field if sys.version_info >= (3, 13) else _eq


def _hash(self) -> int:
    return hash(self._record_shape.compared(self))


_REPRS: set[tuple[int, int]] = set()  # the reprs being made, by object and thread


def _repr(self) -> str:
    key = (id(self), threading.get_ident())
    if key in _REPRS:
        return "..."
    _REPRS.add(key)
    try:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._record_shape.shown)
    finally:
        _REPRS.discard(key)
    return f"{self.__class__.__qualname__}({shown})"
