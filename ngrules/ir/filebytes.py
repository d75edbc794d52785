"""A file's bytes read whole into memory its reader owns, which weights view read-only.

A model's large weights are read-only arrays viewing the bytes of its file (no copy). When
those bytes are `FileBytes` rather than `bytes`, the reader may later *spend* them: give them
to one rewrite (`rewrite(..., spend=...)`) whose constant folding then writes a folded weight
(`w * s` after a batchnorm is folded into a convolution) over the bytes of the weight it was
computed from, when nothing else in the graph can read them, instead of into new memory. A
caller spends them only when it will read none of the nodes over them again (the `apply`
command: the graph read is dropped for the rewrite's result). Until then nothing writes them:
the op table takes arrays viewing them as immutable, as it takes arrays viewing `bytes`.

They are private anonymous memory (`mmap`): unlike a `bytearray`, nothing zeroes them before
the file is read into them, so their pages are first touched by the read, in the kernel, with
the interpreter released (the file is read on a thread while `onnx` is imported).
"""

from __future__ import annotations

import mmap

import numpy as np

#: Copy-on-write pages of this process alone, where the platform has the flag (not Windows).
_PRIVATE = {"flags": mmap.MAP_PRIVATE} if hasattr(mmap, "MAP_PRIVATE") else {}


class FileBytes(mmap.mmap):
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


def read_into(file, size: int) -> FileBytes | bytes:
    """The file's bytes from its position on: `size` of them (fewer if it shrank since its
    size was taken), one more if it has grown (the caller compares the length with `size`).
    An empty read is `b""`."""
    data = FileBytes(-1, size + 1, **_PRIVATE)  # the extra byte: growth shows
    got = 0
    with memoryview(data) as view:
        while got <= size:
            n = file.readinto(view[got:])
            if not n:
                break
            got += n
    if got == 0:
        data.close()
        return b""
    if got < size + 1:
        data.resize(got)
    return data
