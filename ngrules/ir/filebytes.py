"""A file's bytes read whole into memory its reader owns, which weights view read-only.

A model's large weights are read-only arrays viewing the bytes of its file (no copy). When
those bytes are `FileBytes` rather than `bytes`, the reader may later *spend* them: give them
to one rewrite (`rewrite(..., spend=...)`) whose constant folding then writes a folded weight
(`w * s` after a batchnorm is folded into a convolution) over the bytes of the weight it was
computed from, when nothing else in the graph can read them, instead of into new memory. A
caller spends them only when it will read none of the nodes over them again (the `apply`
command: the graph read is dropped for the rewrite's result). Until then nothing writes them:
the op table takes arrays viewing them as immutable, as it takes arrays viewing `bytes`.
"""

from __future__ import annotations

import numpy as np


class FileBytes(bytearray):
    """The bytes of a file read once (see the module): writable only by a rewrite they were
    given to; every array of them a node holds is a read-only view."""

    __slots__ = ()


def root(array: np.ndarray) -> object:
    """The object whose memory an array views (itself when it owns its data): the end of its
    chain of bases, through a memoryview to the object it exports."""
    base: object = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base.obj if isinstance(base, memoryview) else base


def read_into(file, size: int) -> FileBytes:
    """The file's bytes from its position on, at most `size` of them, and one more if it has
    grown since its size was taken (the caller compares the length with `size`)."""
    data = FileBytes(size)
    got = 0
    with memoryview(data) as view:
        while got < size:
            n = file.readinto(view[got:])
            if not n:
                break
            got += n
    if got < size:
        del data[got:]
    elif file.read(1):
        data.append(0)  # it grew: one byte more than `size` says so
    return data
