"""The `.npz` arrays file of a graph file, read as untrusted input.

The archive is checked against the SHA-256 its graph file records, then each array is read
on demand: its npy header first (dtype and shape, compared with what the graph file says and
with a size limit), and only then exactly the bytes that header promises. Any fault in the
archive (a bad zip structure, an "encrypted" member, an unknown compression, a truncated or
padded member, an object array needing pickle) is a `FileError` naming the file.
"""

from __future__ import annotations

import hashlib
import math
import os
import zipfile
from collections.abc import Sequence
from typing import BinaryIO

import numpy as np

from ngrules.errors import FileError

#: The dtypes an array (and a dtype attribute) may have: plain numbers and booleans.
DTYPE_NAMES = frozenset(
    ["bool"]
    + [f"{k}{b}" for k in ("int", "uint") for b in (8, 16, 32, 64)]
    + ["float16", "float32", "float64", "complex64", "complex128"]
)

#: Bytes of array data one arrays file may hold in all (its arrays, decompressed).
MAX_ARRAY_BYTES = 1 << 34

_CHUNK = 1 << 20


class _Corrupt(Exception):
    """A member whose bytes are not what its header promises."""


def sha256_of(f: BinaryIO) -> str:
    """The SHA-256 of a whole open file, read in blocks."""
    f.seek(0)
    digest = hashlib.sha256()
    for block in iter(lambda: f.read(_CHUNK), b""):
        digest.update(block)
    return digest.hexdigest()


def _read_header(stream) -> tuple[tuple[int, ...], bool, np.dtype]:
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(stream)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(stream)
    raise _Corrupt(f"npy format version {version} is not supported")


def _read_exactly(stream, out: np.ndarray) -> None:
    """Fill `out` from the stream; the member must end right after it."""
    view = memoryview(out.reshape(-1).view(np.uint8))
    filled = 0
    while filled < len(view):
        n = stream.readinto(view[filled : filled + _CHUNK])
        if not n:
            raise _Corrupt(f"the data ends after {filled} of {len(view)} bytes")
        filled += n
    if stream.read(1):  # reading to the end also checks the member's CRC
        raise _Corrupt("there are bytes after the array's data")


class ArraysFile:
    """An open `.npz` (its digest already checked); `read(key, dtype, shape)` gives one array."""

    def __init__(self, f: BinaryIO, name: str | os.PathLike):
        self.name = name
        try:
            f.seek(0)
            self.zip = zipfile.ZipFile(f)
            infos = self.zip.infolist()
        except Exception as e:  # untrusted bytes: zipfile raises many kinds, each a bad file
            raise FileError(f"not a readable .npz file: {_reason(e)}") from None
        self.members = {i.filename[: -len(".npy")]: i for i in infos if i.filename.endswith(".npy")}
        self.budget = MAX_ARRAY_BYTES

    def read(self, key: str, dtype: np.dtype, shape: Sequence[int]) -> np.ndarray:
        """The array `key`, which the graph file says has this dtype and shape."""
        try:
            with self.zip.open(self.members[key]) as stream:
                return self._read_member(stream, key, dtype, tuple(shape))
        except FileError:
            raise
        except MemoryError:
            raise FileError(f"array {key!r}: not enough memory to read it") from None
        except Exception as e:  # untrusted bytes, as above
            raise FileError(f"array {key!r} in {self.name} cannot be read: {_reason(e)}") from None

    def _read_member(self, stream, key: str, dtype: np.dtype, shape: tuple) -> np.ndarray:
        found_shape, fortran, found = _read_header(stream)
        if found.hasobject or found.name not in DTYPE_NAMES:
            raise _Corrupt(f"its dtype {found!s} is not a plain number type (pickles are refused)")
        if (found.name, found_shape) != (dtype.name, shape):
            raise FileError(
                f"array {key!r} is {found.name} of shape {list(found_shape)} in the .npz, "
                f"but the graph says {dtype.name} of shape {list(shape)}"
            )
        nbytes = math.prod(shape) * found.itemsize
        if nbytes > self.budget:
            raise FileError(
                f"array {key!r} needs {nbytes} bytes, more than the limit of {MAX_ARRAY_BYTES} "
                "for the arrays of one file"
            )
        self.budget -= nbytes
        flat = np.empty(math.prod(shape), dtype=found)
        _read_exactly(stream, flat)
        if fortran:
            return np.array(flat.reshape(shape, order="F"), order="C")
        return flat.reshape(shape)

    def close(self) -> None:
        self.zip.close()


def _reason(e: Exception) -> str:
    text = str(e)
    if isinstance(e, _Corrupt):
        return text
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
