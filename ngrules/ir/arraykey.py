"""Arrays in hash-consing keys: equal by bytes, hashed from a sample, never copied."""

from __future__ import annotations

import numpy as np


class ArrayKey:
    """An array as part of a node's key: equal to another of the same dtype, shape and bytes.

    Its hash reads at most `SAMPLE` elements spread over the array, so a weight of 400 MB is
    neither copied into the key nor hashed byte by byte; equality (only asked of arrays that
    share that hash) compares every byte. The array is read-only (`normalize_attrs`)."""

    __slots__ = ("array", "_hash")
    SAMPLE = 1024

    def __init__(self, array: np.ndarray):
        self.array = array
        step = -(-array.size // self.SAMPLE)  # `flat` samples without a contiguous copy
        sample = array.flat[::step] if step > 1 else array
        self._hash = hash((array.dtype.str, array.shape, sample.tobytes()))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayKey):
            return NotImplemented
        a, b = self.array, other.array
        if a is b:
            return True
        if self._hash != other._hash or a.dtype.str != b.dtype.str or a.shape != b.shape:
            return False
        if a.nbytes <= _SMALL and not a.dtype.hasobject:  # the same bytes, compared as bytes
            return a.tobytes() == b.tobytes()
        return bool(np.array_equal(_bytes_of(a), _bytes_of(b)))


#: Arrays of at most this many bytes are compared as `bytes` copies (10x faster than
#: `array_equal` for the small attributes hash-consing meets: slice specs, scalars).
_SMALL = 1 << 16


def _bytes_of(array: np.ndarray) -> np.ndarray:
    """The array's bytes as a flat uint8 array (a view when it is contiguous)."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)
