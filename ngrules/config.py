"""`[tool.ngrules]` in the nearest `pyproject.toml`: project settings the command line and the
pytest plugin share (which modules register ops, which rules files are the project's).

The table names code to import, so it is read only from a file nobody else could have put
there: owned by this user or root, in a folder owned by them, neither writable by every user.
Any other pyproject.toml is ignored with a one-line warning (docs/security.md).
"""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import field
from pathlib import Path

from ngrules.errors import NgrulesError
from ngrules.records import frozen

KNOWN_KEYS = frozenset({"ops", "rules"})


@frozen
class ProjectConfig:
    """The `[tool.ngrules]` table; `path` is the pyproject.toml it came from (None: none found)."""

    path: Path | None = None
    ops: tuple[str, ...] = ()
    rules: tuple[str, ...] = field(default=())

    @property
    def root(self) -> Path | None:
        return None if self.path is None else self.path.parent


def find_pyproject(start: Path | str = ".") -> Path | None:
    """The nearest `pyproject.toml` at or above `start`."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def untrusted(path: Path) -> str | None:
    """Why `path` may have been written by someone else (so must not name code), or None.

    The file and its folder (both, for a symbolic link) must belong to this user or root and
    not be writable by every user: a sticky /tmp still lets anyone add a module beside it."""
    if not hasattr(os, "getuid"):  # pragma: no cover - Windows: no owners to compare
        return None
    me = os.getuid()
    real = path.resolve()
    for what, where in (("file", path), ("folder", path.parent), ("file", real),
                        ("folder", real.parent)):
        try:
            info = where.stat()
        except OSError as e:
            return f"cannot stat its {what}: {e.strerror}"
        if info.st_uid not in (me, 0):
            return f"its {what} belongs to another user (uid {info.st_uid})"
        if info.st_mode & stat.S_IWOTH:
            return f"its {what} {where} is writable by every user"
    return None


_WARNED: set[Path] = set()


def _warn_once(path: Path, why: str) -> None:
    if path not in _WARNED:
        _WARNED.add(path)
        print(f"ngrules: warning: ignoring [tool.ngrules] in {path}: {why}", file=sys.stderr)


def load_config(start: Path | str = ".") -> ProjectConfig:
    """The `[tool.ngrules]` table of the nearest pyproject.toml (empty when there is none, or
    when it is not trusted: see `untrusted`; a one-line warning then says why)."""
    path = find_pyproject(start)
    if path is None:
        return ProjectConfig()
    why = untrusted(path)
    if why is not None:
        _warn_once(path, why)
        return ProjectConfig()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise NgrulesError(f"{path}: cannot read [tool.ngrules]: {e}") from None
    if not _may_name_ngrules(text):
        return ProjectConfig(path)
    tomllib = _tomllib()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise NgrulesError(f"{path}: cannot read [tool.ngrules]: {e}") from None
    table = data.get("tool", {}).get("ngrules", {})
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise NgrulesError(
            f"{path}: unknown key(s) in [tool.ngrules]: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    return ProjectConfig(path, _strings(path, table, "ops"), _strings(path, table, "rules"))


def _may_name_ngrules(text: str) -> bool:
    """Whether a TOML text may hold a `[tool.ngrules]` table: it names `ngrules`, or has an
    escape that could spell it in a quoted key. Most projects' files do not, and are not
    parsed (tomllib costs ~3 ms to import, at every command's start: issue 34)."""
    return "ngrules" in text or "\\u" in text or "\\U" in text


def _tomllib():
    """The standard library's TOML parser (tomli before Python 3.11), imported when used."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib
    return tomllib


def _strings(path: Path, table: dict, key: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise NgrulesError(f"{path}: [tool.ngrules] {key} must be a list of strings")
    return tuple(value)


# -- modules that register ops ------------------------------------------------------------------
ENTRY_POINT_GROUP = "ngrules.ops"


def import_ops_module(name: str, base: Path | str = ".") -> None:
    """Import a module that registers ops and functions: a dotted name (looked up with `base`
    first on the path, as `python -m` would) or a `.py` file (relative to `base`)."""
    import importlib
    import importlib.util

    try:
        if name.endswith(".py") or "/" in name or "\\" in name:
            path = (Path(base) / name).resolve()
            key = f"ngrules_ops_{abs(hash(str(path)))}"
            if key in sys.modules:
                return
            spec = importlib.util.spec_from_file_location(key, path)
            if spec is None or not path.is_file():
                raise FileNotFoundError(f"no such file {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[key] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[key]
                raise
            return
        root = str(Path(base).resolve())
        added = root not in sys.path
        if added:
            sys.path.insert(0, root)
        try:
            importlib.import_module(name)
        finally:
            if added:
                sys.path.remove(root)
    except NgrulesError as e:
        raise NgrulesError(f"ops module {name!r}: {e.message}", e.span) from None
    except Exception as e:  # the module is the user's: say which one failed and how
        raise NgrulesError(f"cannot import ops module {name!r}: {type(e).__name__}: {e}") from None


def entry_point_ops() -> list[str]:
    """Load every `ngrules.ops` entry point of the installed packages (a module, or a function
    called with no arguments); their names, in the order loaded."""
    if not _may_declare_ops():
        return []
    from importlib.metadata import entry_points

    loaded = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            target = ep.load()
            if ep.attr and callable(target):
                target()
        except NgrulesError:
            raise
        except Exception as e:
            raise NgrulesError(
                f"cannot load ops entry point {ep.name!r} ({ep.value}): {type(e).__name__}: {e}"
            ) from None
        loaded.append(ep.name)
    return loaded


#: A section header of the group in an `entry_points.txt`.
_GROUP_HEADER = re.compile(rb"^\s*\[\s*" + re.escape(ENTRY_POINT_GROUP.encode()) + rb"\s*\]", re.M)


def _may_declare_ops() -> bool:
    """Whether an installed distribution may declare `ngrules.ops` entry points: the
    `entry_points.txt` of the `*.dist-info` and `*.egg-info` folders of `sys.path`'s folders
    searched for the group's header, as importlib.metadata finds them (which costs 10-25 ms
    to import and scan, and is asked only when one is found). True where this search
    cannot tell: an archive on the path, or an import finder that finds distributions."""
    import importlib.machinery

    finders = (importlib.machinery.PathFinder, importlib.machinery.BuiltinImporter,
               importlib.machinery.FrozenImporter)
    if any(hasattr(f, "find_distributions") and not (f in finders or isinstance(f, finders))
           for f in sys.meta_path):
        return True
    for entry in sys.path:
        folder = entry or "."
        if os.path.isfile(folder) or folder.endswith(".egg"):
            return True  # a zip or an egg: importlib.metadata reads inside it
        try:
            names = [e.name for e in os.scandir(folder) if e.name.endswith((".dist-info",
                                                                           ".egg-info"))]
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), "rb") as f:
                    if _GROUP_HEADER.search(f.read()):
                        return True
            except OSError:
                continue
    return False


def load_ops(modules: list[str] | tuple[str, ...] = (), start: Path | str = ".") -> ProjectConfig:
    """Everything that registers ops for a command or a test session, in this order: installed
    packages' `ngrules.ops` entry points, `[tool.ngrules] ops` of the nearest pyproject.toml
    (relative to its folder), then `modules` (relative to start). Returns the config read."""
    config = load_config(start)
    entry_point_ops()
    for name in config.ops:
        import_ops_module(name, config.root)
    for name in modules:
        import_ops_module(name, start)
    return config
