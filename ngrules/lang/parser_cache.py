"""Where the parser's tables are cached: in the user's own cache folder, never a shared one.

Building the LALR parser from the grammar takes a few hundred milliseconds, so it is cached.
lark's own default (`cache=True`) is a pickle in the shared temporary folder under a name anyone
can compute: another local user could plant a pickle there and run code in every ngrules
process. The cache lives instead in `$XDG_CACHE_HOME/ngrules` (default `~/.cache/ngrules`),
created 0700. It is used only when that folder is a real folder (not a symlink) owned by this
user that nobody else can enter, inside a folder only this user (or root) can write, and the
cache file a regular file owned by this user that nobody else can write; any other file there
is removed, never read. When no such folder can be had (no home folder, a read-only one,
another OS), the parser is built without a cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import sys
from pathlib import Path


def _owned_private(st: os.stat_result, mask: int) -> bool:
    """Owned by this user, with none of the `mask` permission bits set."""
    return st.st_uid == os.geteuid() and not st.st_mode & mask


def cache_folder() -> Path | None:
    """The private cache folder, created if need be; None if it cannot be trusted."""
    if not hasattr(os, "geteuid"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):  # the XDG spec says to ignore a relative path
        return None
    folder = Path(base) / "ngrules"
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        parent = os.stat(base)
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
        st = os.lstat(folder)
    except OSError:
        return None
    # whoever can write the parent can swap the folder: it must be this user's (or root's)
    safe_parent = parent.st_uid in (0, os.geteuid()) and not parent.st_mode & 0o022
    if safe_parent and stat.S_ISDIR(st.st_mode) and _owned_private(st, 0o077):
        return folder
    return None


def cache_file(grammar: str, parser_version: str) -> str | None:
    """The path lark may read and write its cache at, or None for no cache."""
    folder = cache_folder()
    if folder is None:
        return None
    key = f"{grammar}\0{parser_version}\0{sys.version_info[:2]}".encode()
    path = folder / f"parser-{hashlib.sha256(key).hexdigest()[:32]}.lark"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return str(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) and _owned_private(st, 0o022):
        return str(path)
    try:  # not this user's, or writable by others: never read it; lark writes a fresh one
        os.unlink(path)
    except OSError:
        return None
    return str(path)


def seal(path: str | None) -> None:
    """Make the cache file lark just wrote readable and writable by this user only."""
    if path is None:
        return
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and st.st_mode & 0o077:
            os.chmod(path, 0o600)
    except OSError:
        pass
