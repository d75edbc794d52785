"""Files and folders of `.rules` -> a checked `RuleSet`.

Imports are resolved relative to the importing file and each file is read once; imported files
come before the files that import them, so rule order is load order. Every syntax error,
missing import, import cycle and check error is reported together.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ngrules.errors import NgrulesError, RuleError, RuleSyntaxError, Span
from ngrules.lang.checker import check
from ngrules.lang.declared_ops import declare_ops
from ngrules.lang.parser import parse
from ngrules.lang.rules import RuleSet
from ngrules.lang.shipped import library_import
from ngrules.lang.syntax import Import, RulesFile


def _decode(data: bytes, path: str) -> str:
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


_BAD_LIBRARY_IMPORT = (
    "cannot import {!r}: a library import names one file of the shipped library, "
    'such as "ngrules:cpu.rules"'
)


class _Loader:
    """Reads files depth-first through their imports, collecting errors as it goes."""

    def __init__(self):
        self.files: list[RulesFile] = []
        self.errors: list[RuleError] = []
        self.done: set[str] = set()
        self.active: list[str] = []  # the import chain being read (to find cycles)
        self.order: list[str] = []  # every path read, in the order reading started

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
            text = _decode(Path(path).read_bytes(), path)
        except RuleError as e:
            self.errors.append(e)
            self.order.append(path)
            self.done.add(os.path.abspath(path))
            return
        self.load_text(text, path)

    def _import(self, decl: Import, importer: str) -> None:
        base = os.path.dirname(importer) if not importer.startswith("<") else ""
        path = os.path.normpath(os.path.join(base, decl.path))
        shipped = library_import(decl.path)
        if shipped == "":
            self.errors.append(RuleError(_BAD_LIBRARY_IMPORT.format(decl.path), decl.span))
            return
        path = shipped or path
        key = os.path.abspath(path)
        if key in self.active:
            chain = self.active[self.active.index(key) :] + [key]
            names = " -> ".join(os.path.relpath(k) for k in chain)
            self.errors.append(RuleError(f"import cycle: {names}", decl.span))
        elif not os.path.isfile(path):
            self.errors.append(
                RuleError(f"cannot import {decl.path!r}: there is no file {path}", decl.span)
            )
        else:
            self.load_file(path)


def expand_paths(paths) -> list[str]:
    """Each path as given, or the `.rules` files under a folder in sorted order."""
    out = []
    for p in paths:
        p = os.fspath(p)
        p = library_import(p) or p  # "ngrules:cpu.rules" names a file of the shipped library
        if os.path.isdir(p):
            out.extend(str(f) for f in sorted(Path(p).rglob("*.rules")) if f.is_file())
        elif os.path.isfile(p):
            out.append(p)
        else:
            raise NgrulesError(f"no such rules file or folder: {p}")
    return out


def load_rules(*paths: str | os.PathLike) -> RuleSet:
    """The checked rules of these files and folders (folders are searched for `*.rules`)."""
    loader = _Loader()
    for path in expand_paths(paths):
        loader.load_file(path)
    return _checked(loader)


def parse_rules(text: str, path: str = "<string>") -> RuleSet:
    """The checked rules of one text (imports are relative to `path`'s folder, or the cwd)."""
    loader = _Loader()
    loader.load_text(text, path)
    return _checked(loader)


def _checked(loader: _Loader) -> RuleSet:
    """Declare the files' ops, then check their rules; a failed load declares nothing."""
    ops = declare_ops(loader.files, loader.errors)
    try:
        rules = check(loader.files, loader.errors, loader.order)
    except RuleError:
        ops.rollback()
        raise
    return dataclasses.replace(rules, ops=tuple(ops.names))
