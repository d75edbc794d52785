"""The Python code generated for rules (matchers, clauses, dispatchers), compiled once; the
same private folder keeps the parsed syntax of rules files (`parser`).

Every process that loads the shipped library generates a few hundred small functions and used
to compile each with `compile()`: a third of a second of a short `ngrules apply`. The code
objects are kept in memory (the same source compiled once per process) and, marshalled, in the
user's private cache folder (`parser_cache.cache_folder`, with its checks: a file is read only
if it is a regular file this user owns that nobody else can write), keyed by a hash of the
source and the Python version, as Python keeps `.pyc` files; at 4096 files the oldest half
(by modification time) is removed, once per process, so that the rules tests generate by
the thousand never leave the shipped library's syntax trees and code out of the folder (a full
folder used to keep nothing new: every command parsed the library again). Without a trusted
folder the code is compiled as before.

A kept syntax tree is keyed also by `code_digest(ABOVE)`, a digest of the sources of this
layer and the ones below it (and the grammar and the version), so that a developer changing
how trees are built misses instead of reading trees the old code built. The compiled code
needs no such key: its key is the generated source itself, whatever generated it.
`code_digest` is also the verdict cache's (`verification.cache`, with its own `ABOVE`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
import os
import stat
import sys
from pathlib import Path
from types import CodeType

from ngrules.lang.parser_cache import _owned_private, cache_folder

_MEMO: dict[tuple[str, str], CodeType] = {}
_MEMO_SIZE = 4096  # the memory kept is bounded (tests generate rules by the thousand)
_FOLDER: list = []  # [the code folder or None, whether new files may be written (None: unasked)]
_FILES = 4096  # at this many files in the folder, the oldest half is removed
#: The packages of ngrules above the language layer (pyproject's layer contract, `interop`
#: beside it): the syntax trees cannot depend on their code.
ABOVE = ("cli", "lsp", "saturation", "verification", "engine", "interop")


def compiled(source: str, filename: str) -> CodeType:
    """`compile(source, filename, "exec")`, from memory or the private cache when it is there."""
    key = (source, filename)
    code = _MEMO.get(key)
    if code is None:
        code = _from_disk(source, filename)
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.clear()
        _MEMO[key] = code
    return code


def _folder():
    if not _FOLDER:
        base = cache_folder()
        folder = None
        if base is not None:
            folder = base / "code"
            try:
                os.mkdir(folder, 0o700)
            except FileExistsError:
                pass
            except OSError:
                folder = None
            if folder is not None:
                st = os.lstat(folder)
                if not (stat.S_ISDIR(st.st_mode) and _owned_private(st, 0o077)):
                    folder = None
        _FOLDER.extend([folder, None])  # whether there is room: asked at the first write
    return _FOLDER[0]


def _room(folder) -> bool:
    """Whether new files may be written: below _FILES files, or once the oldest half of them
    is removed (another process may remove some at the same time: nothing fails)."""
    try:
        names = os.listdir(folder)
        if len(names) < _FILES:
            return True
        aged = []
        for name in names:
            with contextlib.suppress(OSError):
                aged.append((os.lstat(folder / name).st_mtime, name))
        aged.sort()
        for _, name in aged[: len(aged) - _FILES // 2]:
            with contextlib.suppress(OSError):
                os.unlink(folder / name)
    except OSError:
        return False
    return True


def read(name: str) -> bytes | None:
    """A cached file's bytes, if it is there and trusted (regular, this user's, written by
    nobody else)."""
    folder = _folder()
    if folder is None:
        return None
    path = folder / name
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and _owned_private(st, 0o022):
            with open(path, "rb") as f:
                return f.read()
    except OSError:
        pass
    return None


def write(name: str, data: bytes) -> None:
    """Keep `data` under `name` (atomically, 0600), unless the folder is full or untrusted."""
    folder = _folder()
    if folder is None:
        return
    if _FOLDER[1] is None:  # a run that reads everything from here never lists the folder
        _FOLDER[1] = _room(folder)
    if not _FOLDER[1]:
        return
    tmp = folder / f"{name}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, folder / name)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def key(*parts: str) -> str:
    """A file name from what determines the content (and the Python version)."""
    return hashlib.sha256("\0".join((sys.version, *parts)).encode()).hexdigest()[:40]


def _from_disk(source: str, filename: str) -> CodeType:
    name = f"{key(filename, source)}.marshal"
    data = read(name)
    if data is not None:
        try:
            code = marshal.loads(data)
            if isinstance(code, CodeType):
                return code
        except (EOFError, ValueError, TypeError):
            pass
    code = compile(source, filename, "exec")
    write(name, marshal.dumps(code))
    return code


def parse_kept(text: str, path: str):
    """`parser.parse(text, path)`, the syntax tree of a file kept here and read back for the
    same text, path, grammar and lark (the shipped library is parsed once, not at every
    command); a text with no file (`<string>`) is parsed as it is."""
    import pickle

    from ngrules.lang.syntax import RulesFile

    if path.startswith("<"):
        return parse(text, path)
    name = f"{trees_key('rules', path, text)}.ast"
    data = read(name)
    if data is not None:
        try:
            tree = pickle.loads(data)  # noqa: S301 - a file of this user's private folder
            if isinstance(tree, RulesFile) and tree.text == text and tree.path == path:
                return tree
        except Exception:  # a stale or truncated file: parsed again
            pass
    tree = parse(text, path)
    write(name, pickle.dumps(tree))
    return tree


def trees_key(kind: str, *parts: str) -> str:
    """`key` of what is made from syntax trees: also by what made the trees, the code of this
    layer and below (`code_digest(ABOVE)`), the installed lark and the grammar."""
    from ngrules.lang.grammar import grammar_text, lark_digest

    return key(kind, code_digest(ABOVE), lark_digest(), grammar_text(), *parts)


def parse(text: str, path: str):
    """`parser.parse`, lark imported only now: a file read from the cache needs none."""
    from ngrules.lang.parser import parse

    return parse(text, path)


def code_digest(above: tuple[str, ...], root: Path | None = None) -> str:
    """A digest of the version, the grammar and every `.py` file of the package `root`
    (ngrules) outside its packages named in `above`; the version alone when no file can be
    read (an install without sources). Each file is read once per process (all of them: about
    10 ms), whichever caches ask."""
    return _code_digest(above, root or _package())


@functools.lru_cache(maxsize=1)
def _package() -> Path:
    return Path(__file__).resolve().parents[1]


@functools.lru_cache(maxsize=16)
def _code_digest(above: tuple[str, ...], root: Path) -> str:
    from ngrules.version import __version__

    h, read = hashlib.sha256(__version__.encode()), False
    for name in _entries(root):
        if name not in above:
            digest = _entry_digest(root, name)
            read |= digest is not None
            h.update(f"\0{name}\0{digest}".encode())
    return h.hexdigest()[:32] if read else __version__


@functools.lru_cache(maxsize=8)
def _entries(root: Path) -> tuple[str, ...]:
    """The package's top-level modules and packages, and `grammar` (the file of the folder
    beside it, where a source tree has it)."""
    with contextlib.suppress(OSError):
        return ("grammar", *sorted(e.name for e in os.scandir(root) if e.name != "__pycache__"))
    return ("grammar",)


@functools.lru_cache(maxsize=256)
def _entry_digest(root: Path, name: str) -> str | None:
    """The digest of one top-level module or package's sources (`.py`, `.lark`), or None."""
    top = root.parent / "grammar" / "ngrules.lark" if name == "grammar" else root / name
    files = [str(top)] if top.is_file() and top.suffix in (".py", ".lark") else []
    for folder, _, names in os.walk(top):
        files += [os.path.join(folder, n) for n in names if n.endswith((".py", ".lark"))]
    h, read = hashlib.sha256(), 0
    for path in sorted(files):
        with contextlib.suppress(OSError), open(path, "rb") as f:
            data = f.read()
            h.update(f"\0{os.path.relpath(path, root)}\0{len(data)}\0".encode() + data)
            read += 1
    return h.hexdigest() if read else None


def forget_code_digests() -> None:
    """Read the sources again at the next `code_digest` (a new process does: for tests)."""
    for memo in (_code_digest, _entries, _entry_digest):
        memo.cache_clear()
