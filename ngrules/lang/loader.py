"""Files and folders of `.rules` -> a checked `RuleSet`.

Imports are resolved relative to the importing file and each file is read once; imported files
come before the files that import them, so rule order is load order. An import reads only
`.rules` files inside the folders being loaded or an explicit search path, and a file given by
name that is not a `.rules` file never has its text quoted in an error. A file found in a
folder, or given by name, that is a symbolic link out of that folder is refused unread (a link
to /proc/self/environ would have its text quoted), and only regular files of at most
`MAX_FILE_BYTES` are read. Imports nest at most `MAX_IMPORT_DEPTH` files deep (a chain of 400
was a RecursionError). Every syntax error, missing import, import cycle and check error is
reported together; bidirectional control characters are warnings (`RuleSet.warnings`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ngrules.errors import FileError, NgrulesError, RuleError, RuleErrors, RuleSyntaxError, Span
from ngrules.ir import declared
from ngrules.ir.fileio import read_regular
from ngrules.lang import code_cache
from ngrules.lang.check_cache import checked_kept
from ngrules.lang.checker import check
from ngrules.lang.declared_ops import declare_ops
from ngrules.lang.lexical import bidi_warnings
from ngrules.lang.rules import RuleSet
from ngrules.lang.shipped import LIBRARY_PREFIX, library_import
from ngrules.lang.syntax import Import, OpDecl, RulesFile


def decode_source(data: bytes, path: str) -> str:
    """UTF-8 text, or an error located at the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[: e.start].decode("utf-8", errors="replace")
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
        raise RuleSyntaxError(
            f"this file is not UTF-8 text (byte 0x{data[e.start]:02x})", Span(path, line, col)
        ) from None


#: The largest rules file read (the shipped library's largest is a few kB).
MAX_FILE_BYTES = 16 * 2**20


def read_source(path: str) -> str:
    """The text of a rules file: a regular file of at most MAX_FILE_BYTES, UTF-8."""
    try:
        data = read_regular(path, MAX_FILE_BYTES)
    except FileError as e:
        raise NgrulesError(f"{path}: {e.message}") from None
    return decode_source(data, path)


#: How deep imports may nest (a file importing a file importing ...): reading them recurses.
MAX_IMPORT_DEPTH = 100

_BAD_LIBRARY_IMPORT = (
    'a library import names one file of the shipped library, such as "ngrules:cpu.rules"'
)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class _Loader:
    """Reads files depth-first through their imports, collecting errors as it goes.

    An import names a `.rules` file, relative to the importing file (or else to a folder of the
    search path); it may read only files inside the folders being loaded (a file given by
    itself counts as its folder) or inside a folder of the search path.
    """

    def __init__(self, roots, search_path=()):
        self.files: list[RulesFile] = []
        self.errors: list[RuleError] = []
        self.warnings: list[RuleError] = []
        self.done: set[str] = set()
        self.active: list[str] = []  # the import chain being read (to find cycles)
        self.order: list[str] = []  # every path read, in the order reading started
        self.search = [os.fspath(p) for p in search_path]
        self.allowed = [os.path.realpath(p) for p in [*roots, *self.search]]

    def load_text(self, text: str, path: str, kept: bool = False) -> None:
        """Parse and follow the imports of `text`; `kept`: a file read from disk, whose
        syntax tree the private cache keeps (not an editor's unsaved text)."""
        key = os.path.abspath(path)
        self.active.append(key)
        self.order.append(path)
        self.warnings.extend(bidi_warnings(text, path))
        try:
            parsed = code_cache.parse_kept(text, path) if kept else code_cache.parse(text, path)
        except RuleError as e:
            self.errors.append(e)
        else:
            for decl in parsed.decls:
                if isinstance(decl, Import):
                    self._import(decl, path)
            self.files.append(parsed)
        self.active.pop()
        self.done.add(key)

    def load_file(self, path: str) -> None:
        if os.path.abspath(path) in self.done:
            return
        try:
            text = read_source(path)
        except RuleError as e:
            self.errors.append(e)
            self.order.append(path)
            self.done.add(os.path.abspath(path))
            return
        self.load_text(text, path, kept=True)

    def _import(self, decl: Import, importer: str) -> None:
        if decl.path.startswith(LIBRARY_PREFIX):  # never also a path beside the importer
            path = self._library(decl)
        else:
            path = self._resolve(decl, importer)
        if path is None:
            return
        key = os.path.abspath(path)
        if len(self.active) >= MAX_IMPORT_DEPTH and key not in self.done:
            self.errors.append(RuleError(
                f"imports nest too deep: this import would read a file {len(self.active)} "
                f"imports away from the first (at most {MAX_IMPORT_DEPTH - 1} are allowed)",
                decl.span,
            ))
        elif key in self.active:
            chain = self.active[self.active.index(key) :] + [key]
            names = " -> ".join(os.path.relpath(k) for k in chain)
            self.errors.append(RuleError(f"import cycle: {names}", decl.span))
        else:
            self.load_file(path)

    def _library(self, decl: Import) -> str | None:
        """`import "ngrules:cpu.rules"`: a file of the shipped library, which (with the files
        it imports itself) may be read from anywhere."""
        shipped = library_import(decl.path)
        if not shipped:
            return self._refuse(decl, _BAD_LIBRARY_IMPORT)
        if not os.path.isfile(shipped):
            return self._refuse(decl, f"there is no file {shipped}")
        self.allowed.append(os.path.realpath(os.path.dirname(shipped)))
        return shipped

    def _resolve(self, decl: Import, importer: str) -> str | None:
        """The file an import reads, or None (and an error) if it may not or does not exist."""
        if not decl.path.endswith(".rules"):
            return self._refuse(decl, "only .rules files can be imported")
        base = os.path.dirname(importer) if not importer.startswith("<") else ""
        tried = [os.path.normpath(os.path.join(base, decl.path))]
        tried += [os.path.normpath(os.path.join(s, decl.path)) for s in self.search]
        path = next((p for p in tried if os.path.isfile(p)), None)
        if path is None:
            return self._refuse(decl, f"there is no file {' or '.join(tried)}")
        if not any(_inside(os.path.realpath(path), a) for a in self.allowed):
            return self._refuse(
                decl,
                f"{path} is outside the folders being loaded; add its folder to the search "
                "path (load_rules(..., search_path=[...]), --import-path) to allow it"
            )
        return path

    def _refuse(self, decl: Import, why: str) -> None:
        self.errors.append(RuleError(f"cannot import {decl.path!r}: {why}", decl.span))


def expand_paths(paths) -> list[str]:
    """Each path as given, or the `.rules` files under a folder in sorted order; a file that is
    a symbolic link out of the folder it was found in (or, given by name, out of its own
    folder) is an error, never followed."""
    out = []
    for p in paths:
        p = os.fspath(p)
        shipped = library_import(p)  # "ngrules:cpu.rules" names a file of the shipped library
        if shipped:
            p = shipped
        if os.path.isdir(p):
            found = (str(f) for f in sorted(Path(p).rglob("*.rules")) if f.is_file())
            out.extend(_kept_inside(f, p) for f in found)
        elif os.path.isfile(p):
            out.append(p if shipped else _kept_inside(p, os.path.dirname(os.path.abspath(p))))
        elif os.path.exists(p):
            raise NgrulesError(f"{p}: not a regular file or a folder")
        else:
            raise NgrulesError(f"no such rules file or folder: {p}")
    return out


def _kept_inside(path: str, folder: str) -> str:
    if not _inside(os.path.realpath(path), os.path.realpath(folder)):
        where = folder if folder != os.path.dirname(os.path.abspath(path)) else "its folder"
        raise NgrulesError(
            f"{path}: a symbolic link out of {where}; not followed (name the file it links "
            "to instead)"
        )
    return path


def load_rules(
    *paths: str | os.PathLike, search_path: Iterable[str | os.PathLike] = ()
) -> RuleSet:
    """The checked rules of these files and folders (folders are searched for `*.rules`).

    `import` reads `.rules` files inside these folders (a file's own folder for a file);
    search_path lists further folders imports may read from, searched in order."""
    paths = [library_import(os.fspath(p)) or p for p in paths]  # "ngrules:nn.rules"
    roots = [p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p)) for p in paths]
    loader = _Loader(roots, search_path)
    for path in expand_paths(paths):
        loader.load_file(path)
    return _checked(loader, kept=True)


def parse_rules(
    text: str, path: str = "<string>", search_path: Iterable[str | os.PathLike] = ()
) -> RuleSet:
    """The checked rules of one text (imports are relative to `path`'s folder, or the cwd,
    and read files under that folder or the search path)."""
    return _checked(_text_loader(text, path, search_path))


def _text_loader(text: str, path: str, search_path) -> _Loader:
    root = os.path.dirname(os.path.abspath(path)) if not path.startswith("<") else os.getcwd()
    loader = _Loader([root], search_path)
    loader.load_text(text, path)
    return loader


def _checked(loader: _Loader, kept: bool = False) -> RuleSet:
    """Declare the files' ops, then check their rules; a failed load declares nothing.
    `kept`: files read from disk, whose checked rules the private cache keeps
    (`check_cache`)."""
    ops = declare_ops(loader.files, loader.errors)
    try:
        if kept:
            rules = checked_kept(loader.files, loader.errors, loader.order)
        else:
            rules = check(loader.files, loader.errors, loader.order)
    except RuleError:
        ops.rollback()
        raise
    return dataclasses.replace(rules, ops=tuple(ops.names), warnings=tuple(loader.warnings))


def declare_text(text: str, where: str) -> None:
    """Declare the ops of a graph file's declarations (`where` names them in errors), with
    the checks of a rules file; the text may hold `op` declarations and nothing else."""
    loader = _Loader([])
    loader.load_text(text, where)
    for f in loader.files:
        for d in f.decls:
            if not isinstance(d, OpDecl):
                raise RuleError("a graph file's declarations may only declare ops", d.span)
    _checked(loader)


declared.set_declarer(declare_text)


def check_text(
    text: str, path: str, search_path: Iterable[str | os.PathLike] = ()
) -> tuple[list[RulesFile], list[RuleError]]:
    """The parsed files of `text` (imports included) and every problem found, never raising.

    What an editor shows while a file is being written: the unsaved text stands for `path`.
    """
    loader = _text_loader(text, path, search_path)
    ops = declare_ops(loader.files, loader.errors)
    try:
        check(loader.files, loader.errors, loader.order)
    except RuleErrors as e:
        return loader.files, e.errors
    except NgrulesError as e:
        return loader.files, [RuleError(e.message, e.span)]
    finally:
        ops.rollback()  # a long-running editor must not keep the ops of unsaved text
    return loader.files, []


@contextlib.contextmanager
def checked_text(text: str, path: str) -> Iterator[RuleSet | None]:
    """The checked rules of an editor's unsaved `text` (None if it has errors), its declared
    ops in the op table only inside the `with` block (what reads the rules' ops, a verdict's
    key, runs there)."""
    loader = _text_loader(text, path, ())
    ops = declare_ops(loader.files, loader.errors)
    try:
        try:
            rules = check(loader.files, loader.errors, loader.order)
        except NgrulesError:
            rules = None
        yield rules
    finally:
        ops.rollback()
