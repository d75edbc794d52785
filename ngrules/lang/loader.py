"""Files and folders of `.rules` -> a checked `RuleSet`.

Imports are resolved relative to the importing file and each file is read once; imported files
come before the files that import them, so rule order is load order. An import reads only
`.rules` files inside the folders being loaded or an explicit search path, and a file given by
name that is not a `.rules` file never has its text quoted in an error. Every syntax error,
missing import, import cycle and check error is reported together.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ngrules.errors import NgrulesError, RuleError, RuleSyntaxError, Span
from ngrules.lang.checker import check
from ngrules.lang.parser import parse
from ngrules.lang.rules import RuleSet
from ngrules.lang.syntax import Import, RulesFile


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
        self.done: set[str] = set()
        self.active: list[str] = []  # the import chain being read (to find cycles)
        self.order: list[str] = []  # every path read, in the order reading started
        self.search = [os.fspath(p) for p in search_path]
        self.allowed = [os.path.realpath(p) for p in [*roots, *self.search]]

    def load_text(self, text: str, path: str) -> None:
        key = os.path.abspath(path)
        self.active.append(key)
        self.order.append(path)
        try:
            parsed = parse(text, path)
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
            text = decode_source(Path(path).read_bytes(), path)
        except RuleError as e:
            self.errors.append(e)
            self.order.append(path)
            self.done.add(os.path.abspath(path))
            return
        self.load_text(text, path)

    def _import(self, decl: Import, importer: str) -> None:
        path = self._resolve(decl, importer)
        if path is None:
            return
        key = os.path.abspath(path)
        if key in self.active:
            chain = self.active[self.active.index(key) :] + [key]
            names = " -> ".join(os.path.relpath(k) for k in chain)
            self.errors.append(RuleError(f"import cycle: {names}", decl.span))
        else:
            self.load_file(path)

    def _resolve(self, decl: Import, importer: str) -> str | None:
        """The file an import reads, or None (and an error) if it may not or does not exist."""
        def refuse(why: str) -> None:
            self.errors.append(RuleError(f"cannot import {decl.path!r}: {why}", decl.span))

        if not decl.path.endswith(".rules"):
            return refuse("only .rules files can be imported")
        base = os.path.dirname(importer) if not importer.startswith("<") else ""
        tried = [os.path.normpath(os.path.join(base, decl.path))]
        tried += [os.path.normpath(os.path.join(s, decl.path)) for s in self.search]
        path = next((p for p in tried if os.path.isfile(p)), None)
        if path is None:
            return refuse(f"there is no file {' or '.join(tried)}")
        if not any(_inside(os.path.realpath(path), a) for a in self.allowed):
            return refuse(
                f"{path} is outside the folders being loaded; add its folder to the search "
                "path (load_rules(..., search_path=[...]), --import-path) to allow it"
            )
        return path


def expand_paths(paths) -> list[str]:
    """Each path as given, or the `.rules` files under a folder in sorted order."""
    out = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            out.extend(str(f) for f in sorted(Path(p).rglob("*.rules")) if f.is_file())
        elif os.path.isfile(p):
            out.append(p)
        else:
            raise NgrulesError(f"no such rules file or folder: {p}")
    return out


def load_rules(
    *paths: str | os.PathLike, search_path: Iterable[str | os.PathLike] = ()
) -> RuleSet:
    """The checked rules of these files and folders (folders are searched for `*.rules`).

    `import` reads `.rules` files inside these folders (a file's own folder for a file);
    search_path lists further folders imports may read from, searched in order."""
    roots = [p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p)) for p in paths]
    loader = _Loader(roots, search_path)
    for path in expand_paths(paths):
        loader.load_file(path)
    return check(loader.files, loader.errors, loader.order)


def parse_rules(
    text: str, path: str = "<string>", search_path: Iterable[str | os.PathLike] = ()
) -> RuleSet:
    """The checked rules of one text (imports are relative to `path`'s folder, or the cwd,
    and read files under that folder or the search path)."""
    root = os.path.dirname(os.path.abspath(path)) if not path.startswith("<") else os.getcwd()
    loader = _Loader([root], search_path)
    loader.load_text(text, path)
    return check(loader.files, loader.errors, loader.order)
