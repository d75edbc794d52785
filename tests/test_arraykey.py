"""Hash-consing keys arrays by a sample of their elements (issue 21, item 6): the law stays
that two constants are one node exactly when their dtype, shape and bytes agree."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ngrules.ir import builders as F
from ngrules.ir.arraykey import ArrayKey
from ngrules.ir.axes import Axis

SIZES = st.sampled_from([1, 7, ArrayKey.SAMPLE, ArrayKey.SAMPLE + 1, 3 * ArrayKey.SAMPLE + 5])


@given(size=SIZES, data=st.data())
def test_constants_are_one_node_exactly_when_their_bytes_agree(size, data):
    dtype = data.draw(st.sampled_from([np.float32, np.int64, np.float16]))
    a = data.draw(hnp.arrays(dtype, size, elements=st.integers(-3, 3).map(dtype)))
    b = a.copy()
    if data.draw(st.booleans()):
        i = data.draw(st.integers(0, size - 1))
        b[i] = dtype(7)  # outside the elements drawn: a real change, sampled or not
    axes = [Axis("K", size)]
    same = a.tobytes() == b.tobytes()
    assert (F.constant(a, axes) is F.constant(b, axes)) == same
    assert (ArrayKey(a) == ArrayKey(b)) == same
    assert not same or hash(ArrayKey(a)) == hash(ArrayKey(b))


def test_a_key_holds_the_array_itself_and_the_sample_reads_no_copy():
    base = np.arange(10 * ArrayKey.SAMPLE, dtype=np.float32)
    base.setflags(write=False)
    value = base.reshape(10, -1).T  # not C-ordered, and nothing can write it
    axes = [Axis("A", value.shape[0]), Axis("B", value.shape[1])]
    assert F.constant(value, axes).attrs["value"] is value  # shared, not copied
    assert ArrayKey(value) == ArrayKey(np.ascontiguousarray(value))
    writable = np.arange(10 * ArrayKey.SAMPLE, dtype=np.float32)
    view = writable.reshape(10, -1).T
    view.setflags(write=False)  # read-only, but its base can still be written: copied
    node = F.constant(view, axes)
    writable[0] = -1.0
    assert node.attrs["value"] is not view and node.attrs["value"][0, 0] == 0.0


def test_equal_values_of_other_bytes_are_other_keys_on_either_side_of_the_small_compare():
    """-0.0 is not 0.0 and NaNs are equal exactly when their bytes are, whether the arrays are
    compared as `bytes` (at most `_SMALL` bytes) or as uint8 arrays (larger, or not C-ordered);
    the element changed is one the hash does not sample, so equality itself decides."""
    from ngrules.ir.arraykey import _SMALL

    other_nan = np.array([0x7FF8000000000001], np.uint64).view(np.float64)[0]
    for n in (_SMALL // 8, _SMALL // 8 + 1):  # float64: the last small size, the first large
        for x, y, equal in ((0.0, -0.0, False), (np.nan, np.nan, True), (np.nan, other_nan, False)):
            a, b = np.zeros(n), np.zeros(n)
            a[1], b[1] = x, y
            assert hash(ArrayKey(a)) == hash(ArrayKey(b))  # index 1 is not sampled
            assert (ArrayKey(a) == ArrayKey(b)) is equal, (n, x, y)
        grid = np.zeros((n // 2, 2))
        moved = np.asfortranarray(grid)  # not C-ordered: compared in C order all the same
        assert ArrayKey(grid) == ArrayKey(moved)
        moved[0, 1] = -0.0
        assert ArrayKey(grid) != ArrayKey(moved)
