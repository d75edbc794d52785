"""`ngrules.records.frozen` behaves as `dataclass(frozen=True)` does (it only compiles less as
its classes are made): each record class below is checked against the same class made by
dataclasses."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import FrozenInstanceError, dataclass, field

import pytest

from ngrules.records import frozen


@frozen
class Record:
    """A point."""

    x: float
    y: float = 0.0
    tags: tuple = field(default_factory=tuple)
    where: object = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Reference:  # the same class made by dataclasses
    """A point."""

    x: float
    y: float = 0.0
    tags: tuple = field(default_factory=tuple)
    where: object = field(default=None, compare=False, repr=False)


def _both(*args, **kwargs):
    return Record(*args, **kwargs), Reference(*args, **kwargs)


@pytest.mark.parametrize("args", [(1.0,), (1.0, 2.0, ("a",), "here"), (float("nan"), -0.0)])
def test_equality_hash_and_repr_are_the_generated_ones(args):
    record, reference = _both(*args)
    assert repr(record) == repr(reference).replace(Reference.__qualname__, Record.__qualname__)
    assert hash(record) == hash(reference)
    same, _ = _both(*args)
    assert (record == same) == (reference == Reference(*args))
    x = float(repr(args[0]))  # an equal number, another object (a NaN is then unequal)
    assert (record == Record(x)) == (reference == Reference(x))
    assert record == record and hash(record) == hash(same)


class _Odd:
    """A value whose `==` answers neither True nor False."""

    def __eq__(self, other):
        return "odd"

    __hash__ = object.__hash__


def test_equality_compares_fields_as_this_python_s_dataclasses_do():
    """As a tuple up to 3.12 (a NaN held by both records: equal), field by field from 3.13
    (unequal; a field's own `==` answer returned): what the generated `__eq__` says here."""
    nan, odd = float("nan"), _Odd()
    for args in [(nan,), (nan, 1.0, (nan,)), (1.0, odd), (odd, 2.0), (odd,), (1.0, nan)]:
        assert (Record(*args) == Record(*args)) == (Reference(*args) == Reference(*args)), args
        assert (Record(*args) != Record(*args)) == (Reference(*args) != Reference(*args)), args
        record = Record(*args)
        assert record == record


def test_compared_fields_only_and_the_class_must_match():
    a, b = Record(1.0, 2.0, where="a"), Record(1.0, 2.0, where="b")
    assert a == b and hash(a) == hash(b)  # `where` is not compared
    assert a != Record(1.0, 3.0)
    assert a != Reference(1.0, 2.0) and a.__eq__((1.0, 2.0, ())) is NotImplemented
    assert {a, b} == {a}


def test_fields_cannot_be_assigned_or_deleted_once_made():
    record, reference = _both(1.0)
    for obj in (record, reference):
        for name in ("x", "where", "new"):
            with pytest.raises(FrozenInstanceError, match="cannot assign to field"):
                setattr(obj, name, 2.0)
            with pytest.raises(FrozenInstanceError, match="cannot delete field"):
                delattr(obj, name)
    assert record.x == 1.0 and not hasattr(record, "new")


def test_dataclass_tools_copies_and_pickles_work_alike():
    record = Record(1.0, 2.0, ("t",), where="w")
    assert [f.name for f in dataclasses.fields(record)] == ["x", "y", "tags", "where"]
    assert Record.__match_args__ == Reference.__match_args__ == ("x", "y", "tags", "where")
    changed = dataclasses.replace(record, y=5.0)
    assert (changed.x, changed.y, changed.where) == (1.0, 5.0, "w") and record.y == 2.0
    for again in (pickle.loads(pickle.dumps(record)), copy.copy(record), copy.deepcopy(record)):
        assert again == record and again.where == "w" and type(again) is Record
    assert Record(1.0).tags == () and Record.__doc__ == "A point."
    with pytest.raises(TypeError):
        Record()  # `x` has no default, as the generated __init__ says


def test_a_field_init_does_not_set_cannot_be_assigned_either():
    """A field out of `__init__` with a plain default is read from the class (`__init__`
    never sets it): assigning it afterwards is refused, as dataclass(frozen=True) refuses."""
    @frozen
    class Later:
        x: int
        y: int = field(default=3, init=False)
        z: list = field(default_factory=list, init=False)

    later = Later(1)
    assert (later.y, later.z) == (3, [])
    for name in ("y", "z"):
        with pytest.raises(FrozenInstanceError, match="cannot assign to field"):
            setattr(later, name, 4)
    assert later.y == 3 and later == Later(1)


def test_a_repr_that_reaches_itself_shows_dots():
    @frozen
    class Box:
        items: list

    box = Box([])
    box.items.append(box)
    assert repr(box).endswith(".Box(items=[...])")


def test_a_class_with_its_own_equality_is_refused():
    with pytest.raises(TypeError, match="__eq__"):
        @frozen
        class Own:
            x: int

            def __eq__(self, other):
                return True
