"""A large file written past the page cache (Linux's O_DIRECT), for a writer that syncs it anyway.

`ngrules apply -o out.onnx` syncs the file it writes before putting it in place, so it waits for
the device whichever way the bytes go. Through the page cache, the kernel first takes a fresh
page for every 4 KiB written and copies into it: on a virtual machine that gives its free
memory back to the host, taking those pages again is most of the cost (548 MB: 0.2-1.3 s of
system time, against 0.05 s written directly). `Direct` copies the bytes into one aligned 1 MiB
buffer and writes each full buffer with O_DIRECT; the last, partial one is written through the
cache. Where the file system or the platform has no O_DIRECT (tmpfs, macOS), or refuses a
write, the rest is written as usual: the bytes of the file are the same either way.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os

#: Bytes per direct write: a multiple of every block size a device uses, and of the page size.
CHUNK = 1 << 20

#: Files smaller than this are written through the page cache (the buffer is not worth it).
LEAST = 1 << 26


class Direct:
    """`write(data)` then `close()`: the bytes appended to `file` (opened for writing, at its
    start), full chunks with O_DIRECT where the file system takes them."""

    def __init__(self, file):
        file.flush()
        self.fd = file.fileno()
        self.buffer = mmap.mmap(-1, CHUNK)  # anonymous memory: page-aligned, as O_DIRECT asks
        self.fill = 0
        self.direct = _set_direct(self.fd, True)

    def write(self, data) -> None:
        view = memoryview(data).cast("B")
        while view:
            n = min(len(view), CHUNK - self.fill)
            self.buffer[self.fill:self.fill + n] = view[:n]
            self.fill += n
            view = view[n:]
            if self.fill == CHUNK:
                self._flush()

    def close(self) -> None:
        """Write what is left (through the page cache: its length is not a whole block)."""
        try:
            if self.direct:
                self.direct = not _set_direct(self.fd, False)
            self._flush()
        finally:
            self.buffer.close()

    def _flush(self) -> None:
        with memoryview(self.buffer) as whole:
            done = 0
            if self.direct:
                try:
                    done = os.write(self.fd, whole[:self.fill])
                except OSError as e:  # a file system that takes the flag but not the write
                    if e.errno != errno.EINVAL:
                        raise
                if done != self.fill:  # the rest as usual, from where it stopped
                    self.direct = not _set_direct(self.fd, False)
            while done < self.fill:
                done += os.write(self.fd, whole[done:self.fill])
        self.fill = 0


def _set_direct(fd: int, on: bool) -> bool:
    """Whether O_DIRECT was turned on (or off, for `on=False`) for the open file."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    try:
        import fcntl
    except ImportError:  # pragma: no cover - O_DIRECT without fcntl: no such platform
        return False
    with contextlib.suppress(OSError):
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | flag if on else flags & ~flag)
        return True
    return False
