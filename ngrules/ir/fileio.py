"""Reading input files and replacing output files safely.

Reading: only regular files (a FIFO or a device such as /dev/zero is refused, not read
forever), and only up to a size limit.

Writing (`staged_files`): every output is written completely to a hidden temporary file beside
it and moved into place only when all of them are complete, so a failure or Ctrl-C leaves the
old files and no temporary. Outputs are checked before anything is written; a replaced file
keeps its permission bits; a symbolic link keeps pointing at its target, which is replaced.

Concurrency: writers take an exclusive lock (flock) on the output's folder while they create
their temporary files and while they move them into place, and readers of a file pair take a
shared lock on its folder while they open both files. So two writers of one graph file pair
never leave one's JSON beside the other's arrays, and a reader never opens a mixed pair.
Temporaries left by a killed writer (their creator holds a lock on each while it lives) are
removed by the next write of the same output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, BinaryIO

from ngrules.errors import FileError
from ngrules.interrupts import raise_if_interrupted

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, writes stay atomic
    fcntl = None  # type: ignore[assignment]

_TEMP_SUFFIX = ".tmp"


# -- reading ---------------------------------------------------------------------------------------
def open_regular(path: str | os.PathLike, limit: int) -> BinaryIO:
    """`path` opened for binary reading, if it is a regular file of at most `limit` bytes.

    Raises FileError (the message does not repeat the path) or OSError. A FIFO is opened
    without blocking, so it is refused rather than waited on.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileError("not a regular file")
        if _pseudo(path, info):
            raise FileError("not a regular file (a file of /proc or /sys, made up as it is read)")
        if info.st_size > limit:
            raise FileError(f"{info.st_size} bytes, more than the limit of {limit}")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _pseudo(path: str | os.PathLike, info: os.stat_result) -> bool:
    """Whether an open file lives in /proc or /sys (after links are resolved): such files
    pass for regular ones, say a size they do not have (`/proc/self/pagemap`: 0 bytes, read
    without end) and quote the process's memory or the machine's state."""
    real = os.path.realpath(path)
    if any(real == top or real.startswith(top + "/") for top in _PSEUDO_TOPS):
        return True
    return info.st_dev in _pseudo_devices()


_PSEUDO_TOPS = ("/proc", "/sys")
_PSEUDO_DEVICES: list[set[int]] = []


def _pseudo_devices() -> set[int]:
    if not _PSEUDO_DEVICES:
        found = set()
        for top in _PSEUDO_TOPS:
            with contextlib.suppress(OSError):
                found.add(os.stat(top).st_dev)
        _PSEUDO_DEVICES.append(found)
    return _PSEUDO_DEVICES[0]


def read_regular(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (see `open_regular`): never more
    than the size the file had when it was opened."""
    with open_regular(path, limit) as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(size + 1)
    if len(data) > size:  # it grew while we read it
        raise FileError(f"it grew past its size of {size} bytes while it was read")
    return data


# -- locks -----------------------------------------------------------------------------------------
@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike, exclusive: bool) -> Iterator[None]:
    """An advisory lock on a folder (none where locks are unavailable or it cannot be opened)."""
    fd = -1
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        if fd >= 0:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        if fd >= 0:
            os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def _no_interrupts() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while files are moved, so a Ctrl-C cannot split a pair.

    In the main thread a holding handler records the signal and the old handler gets it on
    exit: masking alone is not enough, as the kernel may hand a process-wide signal to another
    thread (numpy's BLAS threads), whose Python handler then interrupts the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield from _masked()
        return
    held: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in _HELD}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
        if held:
            _deliver(held[0], old[held[0]])


_HELD = (signal.SIGINT, signal.SIGTERM)


def _masked() -> Iterator[None]:
    mask = getattr(signal, "pthread_sigmask", None)
    old = mask(signal.SIG_BLOCK, set(_HELD)) if mask else None
    try:
        yield
    finally:
        if mask:
            mask(signal.SIG_SETMASK, old)


def _deliver(signum: int, handler) -> None:
    """Act on a held signal as its own handler would have."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        os.kill(os.getpid(), signum)


# -- output paths ----------------------------------------------------------------------------------
def real_target(path: str | os.PathLike) -> Path:
    """The file a write to `path` replaces: symbolic links followed, so they stay links."""
    return Path(os.path.realpath(path))


def check_output(path: str | os.PathLike) -> None:
    """Raise FileError unless `path` can be written as a file: not empty, not a folder, in an
    existing folder."""
    if os.fspath(path) == "":
        raise FileError("an output path is empty")
    target = real_target(path)
    if target.is_dir():
        raise FileError(f"{path}: is a folder, not a file")
    if target.exists() and not target.is_file():
        raise FileError(f"{path}: is not a regular file")
    if not target.parent.is_dir():
        raise FileError(f"{path}: folder {target.parent} does not exist")


def _identity(path: str | os.PathLike) -> tuple:
    """What makes two paths one file: the device and inode when it exists, else its real path."""
    target = real_target(path)
    with contextlib.suppress(OSError):
        info = target.stat()
        return (info.st_dev, info.st_ino)
    return (str(target),)


def check_outputs(outputs: Sequence[str | os.PathLike], inputs: Sequence[str | os.PathLike]):
    """Check every output (`check_output`), that no two are one file, and that none is an input."""
    seen: dict[tuple, str | os.PathLike] = {}
    for path in outputs:
        check_output(path)
        key = _identity(path)
        if key in seen:
            twice = os.fspath(path) == os.fspath(seen[key])
            same = f"{path} is" if twice else f"{seen[key]} and {path} are"
            raise FileError(f"{same} given for two outputs; give different paths")
        seen[key] = path
    for path in inputs:
        key = _identity(path)
        if key in seen:
            raise FileError(f"writing {seen[key]} would overwrite the input {path}")


# -- temporaries -----------------------------------------------------------------------------------
def _file_mode(target: Path) -> int:
    """The mode the new file gets: the replaced file's, else the umask's default."""
    with contextlib.suppress(OSError):
        return stat.S_IMODE(target.stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _try_remove_stale(entry: os.DirEntry) -> None:
    """Remove a temporary whose writer is gone: ours, and nobody holds its lock."""
    try:
        fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            return
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(entry.path)
    except OSError:
        return  # a live writer holds it, or it is gone already
    finally:
        os.close(fd)


def _remove_stale_temporaries(target: Path) -> None:
    """Temporaries of this output left by a killed writer (call with the folder locked)."""
    if fcntl is None or not hasattr(os, "getuid"):  # pragma: no cover
        return
    prefix = f".{target.name}."
    with contextlib.suppress(OSError), os.scandir(target.parent) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith(prefix) and name.endswith(_TEMP_SUFFIX):
                _try_remove_stale(entry)


def _as_output_error(e: OSError, path: str | os.PathLike) -> OSError:
    """The error naming the user's path, not the hidden temporary."""
    if e.errno is None:
        return e
    return OSError(e.errno, e.strerror, os.fspath(path))


class _Temp:
    """One staged output: its temporary file, held locked while this process lives."""

    def __init__(self, path: str | os.PathLike, register: Callable[[_Temp], None]):
        """Create the temporary and `register` it, with no Ctrl-C in between (so whoever
        registered it removes it on an error)."""
        self.path, self.target = path, real_target(path)
        with folder_lock(self.target.parent, exclusive=True), _no_interrupts():
            _remove_stale_temporaries(self.target)
            self.fd, self.name = tempfile.mkstemp(
                dir=self.target.parent, prefix=f".{self.target.name}.", suffix=_TEMP_SUFFIX
            )
            self.lock = os.dup(self.fd)
            register(self)
            if fcntl is not None:
                fcntl.flock(self.lock, fcntl.LOCK_EX)

    def write(self, write: Callable[[IO], None], text: bool) -> None:
        if text:
            f = os.fdopen(self.fd, "w", encoding="utf-8", newline="\n")
        else:
            f = os.fdopen(self.fd, "wb")
        with f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(self.name, _file_mode(self.target))

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.name)
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.lock)


def _commit(temps: list[_Temp]) -> None:
    """Move every temporary into place, folder by folder under the folder's lock."""
    for temp in temps:
        check_output(temp.path)  # nothing was replaced yet: a folder in the way stops it all
    folders: dict[Path, list[_Temp]] = {}
    for temp in temps:
        folders.setdefault(temp.target.parent, []).append(temp)
    with _no_interrupts():
        for folder, group in folders.items():
            with folder_lock(folder, exclusive=True):
                for temp in group:
                    try:
                        os.replace(temp.name, temp.target)
                    except OSError as e:
                        raise _as_output_error(e, temp.path) from None
                    temp.close()


@contextlib.contextmanager
def staged_files() -> Iterator[Callable[..., str]]:
    """Yield `stage(path, write, text=False) -> temporary name`; on a clean exit move every
    staged file into place, on an error (or Ctrl-C) remove them all.

    Nothing is replaced until every file is complete, so a failure leaves the old files as
    they were and no temporary file behind.
    """
    temps: list[_Temp] = []

    def stage(path: str | os.PathLike, write: Callable[[IO], None], text: bool = False) -> str:
        check_output(path)
        try:
            temp = _Temp(path, temps.append)
        except OSError as e:
            raise _as_output_error(e, path) from None
        try:
            temp.write(write, text)
        except OSError as e:
            raise _as_output_error(e, path) from None
        return temp.name

    try:
        yield stage
        raise_if_interrupted()  # a Ctrl-C lost in a destructor must not let the files through
        _commit(temps)
    except BaseException:
        for temp in temps:
            temp.discard()
        raise
