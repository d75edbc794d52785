"""A file's bytes read whole into memory its reader owns (or mapped), which weights view
read-only.

A model's large weights are read-only arrays viewing the bytes of its file (no copy). When
those bytes are `FileBytes` rather than `bytes`, the reader may later *spend* them: give them
to one rewrite (`rewrite(..., spend=...)`) whose constant folding then writes a folded weight
(`w * s` after a batchnorm is folded into a convolution) over the bytes of the weight it was
computed from, when nothing else in the graph can read them, instead of into new memory. A
caller spends them only when it will read none of the nodes over them again (the `apply`
command: the graph read is dropped for the rewrite's result). Until then nothing writes them:
the op table takes arrays viewing them as immutable, as it takes arrays viewing `bytes`.

A file of fewer than `MAP_BYTES` is read (`read_into`) into private anonymous memory
(`mmap`): unlike a `bytearray`, nothing zeroes it before the file is read into it, so its pages
are first touched by the read, in the kernel, with the interpreter released (the file is read
on a thread while `onnx` is imported). A larger file is mapped (`map_file`): private,
copy-on-write pages, which are the page cache's own pages until a rewrite writes one (then
this process's copy: the file itself is never written). Mapping spares a copy of the file in
fresh memory, which on some machines costs more than anything else the command does with it;
but the pages read what the file holds when they are read, so `changed` tells whether the file
has changed since it was mapped (its writer checks before the written file is put in place),
and a file cut shorter meanwhile ends the process with a bus error (SIGBUS) where a weight
past its new end is read: a file must not be truncated while it is being read.
"""

from __future__ import annotations

import mmap
import os
import weakref

import numpy as np

#: Copy-on-write pages of this process alone, where the platform has the flag (not Windows).
_PRIVATE = {"flags": mmap.MAP_PRIVATE} if hasattr(mmap, "MAP_PRIVATE") else {}


class FileBytes(mmap.mmap):
    """The bytes of a file read once (see the module): writable only by a rewrite they were
    given to; every array of them a node holds is a read-only view."""

    #: source: a mapped file's (descriptor, identity when mapped, name);
    #: written: the (start, end) offsets of the bytes a rewrite wrote (`wrote`)
    __slots__ = ("source", "written")

    def wrote(self, start: int, end: int) -> None:
        """Note that a rewrite wrote bytes [start, end): they are no longer the file's."""
        try:
            self.written.append((start, end))
        except AttributeError:
            self.written = [(start, end)]


#: Files of at least this many bytes are mapped (`map_file`), smaller ones read (`read_into`):
#: a ResNet-50 (98 MiB) costs the same either way, a VGG-19 (548 MiB) read costs 0.3-0.5 s of
#: system time more than mapped.
MAP_BYTES = 1 << 28

#: Whether files can be mapped copy-on-write here (not on Windows: read there).
CAN_MAP = bool(_PRIVATE)


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


def _identity(fd: int) -> tuple:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def map_file(file, size: int, name: str = "") -> FileBytes | None:
    """The file's `size` bytes mapped private and copy-on-write (see the module); None when
    its size is no longer `size`. `name`: what to call the file in an error. Pages are mapped
    as they are read (mapping them all at once measured no faster, and a weight copied file
    to file, `weights._copy_from_file`, is never read into this process at all)."""
    fd = file.fileno()
    try:
        data = FileBytes(fd, size, flags=mmap.MAP_PRIVATE,
                         prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except ValueError:  # "mmap length is greater than file size"
        return None
    data.source = (os.dup(fd), _identity(fd), name)
    weakref.finalize(data, os.close, data.source[0])
    if data.source[1][2] != size:
        data.close()
        return None
    return data


def changed(data: FileBytes | bytes) -> str | None:
    """The name of the file `data` maps if it has changed since it was mapped, else None
    (None for bytes read)."""
    source = getattr(data, "source", None)
    return source[2] if source is not None and _identity(source[0]) != source[1] else None


def file_span(array: np.ndarray) -> tuple[int, int] | None:
    """(descriptor, offset) of the bytes of a mapped file that a C-ordered array views, when
    no rewrite has written them (their own bytes in the file, if it has not changed); else
    None (an array of bytes read, or of new memory, or in another order)."""
    data = root(array)
    source = getattr(data, "source", None)
    if source is None or data.closed or not array.flags.c_contiguous or not array.nbytes:
        return None
    start = array.ctypes.data - np.frombuffer(data, np.uint8).ctypes.data
    end = start + array.nbytes
    if any(low < end and start < high for low, high in getattr(data, "written", ())):
        return None
    return source[0], start
