"""A large file written past the page cache (`O_DIRECT`), through one small aligned buffer.

Writing a model of hundreds of megabytes through the page cache makes the kernel find that
many fresh pages for the cache; on some machines (virtual ones whose host takes freed memory
back) that is most of the time a write takes, and it varies tenfold from run to run. With
`O_DIRECT` the bytes go from this process's memory to the disk: they are copied into one
`BUFFER_BYTES` buffer (aligned as `O_DIRECT` wants its memory, lengths and offsets), which is
written whole each time it fills. The last bytes (less than `ALIGN`) are written through the
page cache as usual. Where the file system refuses `O_DIRECT` (or the file's position is not
aligned), every byte is written as usual: the file's bytes are the same either way.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

#: `O_DIRECT`'s alignment of memory, lengths and file offsets: a page, which is a multiple of
#: every device's logical block.
ALIGN = mmap.PAGESIZE

#: The buffer each write copies into and writes from (a multiple of `ALIGN`).
BUFFER_BYTES = 1 << 21

_DIRECT = getattr(os, "O_DIRECT", 0)


class DirectWriter:
    """`write(bytes-like)` to an open file's descriptor, from its position on, past the page
    cache when it can be (see the module); `close()` writes what is left."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = mmap.mmap(-1, BUFFER_BYTES)  # page-aligned, as O_DIRECT wants
        self.view = memoryview(self.buffer)
        self.array = np.frombuffer(self.buffer, np.uint8)  # copies into it release the GIL
        self.used = 0
        self.direct = _turn_on(fd)

    def write(self, data) -> None:
        source = np.frombuffer(data, np.uint8)
        at = 0
        while at < len(source):
            n = min(len(source) - at, BUFFER_BYTES - self.used)
            self.array[self.used:self.used + n] = source[at:at + n]
            self.used, at = self.used + n, at + n
            if self.used == BUFFER_BYTES:
                self._flush(BUFFER_BYTES)

    def close(self, rest: bool = True) -> None:
        """Write what is left, with `rest` (its aligned part past the cache), and turn
        `O_DIRECT` off."""
        try:
            if rest:
                self._flush(self.used // ALIGN * ALIGN)
                self._off()
                self._flush(self.used)
        finally:
            self._off()
            del self.array
            self.view.release()
            self.buffer.close()

    def _flush(self, size: int) -> None:
        """Write the buffer's first `size` bytes; keep the rest at its start."""
        done = 0
        while done < size:
            try:
                done += os.write(self.fd, self.view[done:size])
            except OSError as e:  # a file system that takes the flag but not the write
                if not self.direct or e.errno != errno.EINVAL:
                    raise
                self._off()
            if done % ALIGN:
                self._off()  # a short write left the file's end unaligned
        rest = self.used - size
        self.array[:rest] = self.array[size:self.used]
        self.used = rest

    def _off(self) -> None:
        if self.direct:
            self.direct = False
            _set(self.fd, False)


def _turn_on(fd: int) -> bool:
    """Turn `O_DIRECT` on for fd, when the platform has it, fd's position is aligned and its
    file system takes it."""
    if not _DIRECT:
        return False
    try:
        if os.lseek(fd, 0, os.SEEK_CUR) % ALIGN:
            return False
        _set(fd, True)
    except OSError:
        return False
    return True


def _set(fd: int, on: bool) -> None:
    import fcntl

    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | _DIRECT if on else flags & ~_DIRECT)


@contextlib.contextmanager
def writing(file: BinaryIO) -> Iterator[DirectWriter]:
    """A `DirectWriter` of a binary file object, from its position on (its buffer flushed
    first); what is left is written on leaving, unless leaving on an error."""
    file.flush()
    writer = DirectWriter(file.fileno())
    try:
        yield writer
    except BaseException:
        writer.close(rest=False)
        raise
    writer.close()
