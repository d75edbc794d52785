"""The axes algebra: ngraph's ordered +, -, |, & and flattening, as hypothesis properties."""

import itertools
import math

import pytest
from helpers import axes_st, axis_lists
from hypothesis import given
from hypothesis import strategies as st

import ngrules as ng
from ngrules.ir.axes import Axes, Axis, FlattenedAxis, is_difference

pairs = st.tuples(axes_st(), axes_st())


@given(pairs)
def test_plus_concatenates_or_rejects_a_repeated_name(ab):
    a, b = ab
    if set(a.names) & set(b.names):
        with pytest.raises(ng.AxesError, match="both have"):
            a + b
    else:
        assert list(a + b) == list(a) + list(b)
        assert (a + b).names == a.names + b.names


@given(pairs)
def test_minus_keeps_the_left_order(ab):
    a, b = ab
    assert list(a - b) == [x for x in a if x not in b]
    assert not set((a - b).names) & set(b.names)


@given(pairs)
def test_union_is_left_then_new_right_axes(ab):
    a, b = ab
    union = a | b
    assert union[: len(a)] == a
    assert union[len(a) :] == b - a
    assert union.is_equal_set(b | a)
    assert a | a == a


@given(pairs)
def test_intersection_is_a_subset_in_left_order(ab):
    a, b = ab
    both = a & b
    assert list(both) == [x for x in a if x in b]
    assert both.is_sub_set(a) and both.is_sub_set(b)
    assert both.is_equal_set(b & a)
    assert len(both & b) == len(both)


@given(pairs)
def test_difference_and_intersection_split_the_left_operand(ab):
    a, b = ab
    assert len((a - b) & b) == 0
    assert ((a - b) | (a & b)).is_equal_set(a)
    assert len(a - b) + len(a & b) == len(a)
    assert (a - b) + (a & b) == (a - b) | (a & b)


@given(axis_lists())
def test_size_lengths_names(axes):
    made = ng.make_axes(axes)
    assert made.names == tuple(a.name for a in axes)
    assert made.lengths == tuple(a.length for a in axes)
    assert made.size == math.prod(a.length for a in axes)
    assert len(made) == len(axes)


def test_empty_axes_have_size_one():
    assert ng.make_axes([]).size == 1
    assert ng.make_axes([]).lengths == ()


@given(axes_st(min_size=1))
def test_flatten_then_unflatten_is_the_identity(axes):
    flat = axes.flatten(force=True)
    assert isinstance(flat, FlattenedAxis)
    assert flat.length == axes.size
    assert flat.axes == axes
    assert Axes((flat,)).unflatten() == axes
    assert Axes((flat,)).unflatten().lengths == axes.lengths
    assert flat.leaves() == tuple(axes)


@given(axes_st(min_size=1, max_size=1))
def test_flatten_of_one_axis_without_force_is_the_axis(axes):
    assert axes.flatten() is axes[0]


@given(axes_st(min_size=1), axes_st(min_size=1))
def test_flattened_axes_are_equal_exactly_when_their_components_are(a, b):
    fa, fb = FlattenedAxis(a), FlattenedAxis(b)
    assert (fa == fb) == (a == b)
    assert (hash(fa) == hash(fb)) or fa != fb
    assert FlattenedAxis(list(a)) == fa
    for component in a:
        assert fa != component


def test_flattened_axis_naming():
    a, b, c = Axis("A", 2), Axis("B", 3), Axis("C", 4)
    ab = FlattenedAxis([a, b])
    assert (ab.name, ab.length, ab.is_flattened) == ("A*B", 6, True)
    assert FlattenedAxis([ab, c]).name == "(A*B)*C"
    assert FlattenedAxis([ab, c]) != FlattenedAxis([a, b, c])
    assert FlattenedAxis([ab, c]).leaves() == (a, b, c)
    assert FlattenedAxis([a]) != a
    assert FlattenedAxis([a]) != FlattenedAxis([FlattenedAxis([a])])
    assert not ab.is_batch and Axis("N", 3).is_batch


def test_nested_flattening_unflattens_one_level():
    a, b, c = Axis("A", 2), Axis("B", 3), Axis("C", 4)
    outer = Axes((FlattenedAxis([FlattenedAxis([a, b]), c]),))
    assert outer.unflatten() == [FlattenedAxis([a, b]), c]
    assert outer.unflatten().unflatten() == [a, b, c]


@given(st.sampled_from("ABC"), st.integers(1, 9), st.integers(1, 9))
def test_axes_are_equal_by_name(name, n, m):
    assert Axis(name, n) == Axis(name, m)
    assert hash(Axis(name, n)) == hash(Axis(name, m))
    assert Axis(name, n) != Axis(name + "x", n)


@pytest.mark.parametrize("operator", ["-", "|", "&"], ids=["minus", "union", "intersection"])
def test_one_name_with_two_lengths_is_a_clear_error(operator):
    a, b = ng.make_axes({"A": 2, "B": 3}), ng.make_axes({"A": 5})
    op = {"-": lambda x, y: x - y, "|": lambda x, y: x | y, "&": lambda x, y: x & y}[operator]
    with pytest.raises(ng.AxesError, match="'A' is used with two lengths: 2 and 5"):
        op(a, b)


def test_make_axes_forms():
    a, b, c = Axis("A", 2), Axis("B", 3), Axis("C", 4)
    assert ng.make_axes([a, b]) == Axes((a, b))
    assert ng.make_axes((a, b)) == [a, b]
    assert ng.make_axes(a) == [a]
    assert ng.make_axes({"A": 2, "B": 3}).lengths == (2, 3)
    nested = ng.make_axes([[a, b], c])
    assert isinstance(nested[0], FlattenedAxis) and nested[0].axes == [a, b]
    assert nested.lengths == (6, 4)
    assert ng.make_axes(x for x in (a, b)) == [a, b]


@pytest.mark.parametrize(
    "bad, message",
    [
        ([Axis("A", 2), Axis("A", 2)], "'A' appears twice"),
        ([Axis("A", 2), Axis("B", 3), Axis("A", 4)], "'A' appears twice"),
        ("AB", "string"),
        ([1, 2], "expected an Axis"),
    ],
    ids=["duplicate", "duplicate-other-length", "string", "not-axes"],
)
def test_make_axes_rejects_bad_input(bad, message):
    with pytest.raises(ng.AxesError, match=message):
        ng.make_axes(bad)


@pytest.mark.parametrize("length", [0, -1, 2.5, True], ids=["zero", "negative", "float", "bool"])
def test_axis_needs_a_positive_integer_length(length):
    with pytest.raises(ng.AxesError, match="positive integer length"):
        Axis("A", length)


def test_make_axis_without_a_name_is_fresh():
    a, b = ng.make_axis(3), ng.make_axis(3)
    assert a != b and a.name.startswith("Axis_")
    assert ng.make_axis(length=4, name="C").is_channel


@given(axes_st())
def test_axes_are_immutable(axes):
    with pytest.raises(AttributeError):
        axes._axes = ()
    if len(axes):
        with pytest.raises(AttributeError):
            axes[0].length = 7


def test_is_difference_is_equality_with_the_difference():
    """`is_difference(a, b, c)` (the guards' `a == b - c` without building `b - c`) agrees with
    building it, for every ordered choice of a, b and c among three axes."""
    pool = [ng.make_axis(4, "N"), ng.make_axis(8, "F"), ng.make_axis(3, "H")]
    every = [Axes(p) for r in range(4) for c in itertools.combinations(pool, r)
             for p in itertools.permutations(c)]
    for a, b, c in itertools.product(every, repeat=3):
        assert is_difference(a, b, c) == (a == b - c), (a, b, c)
