"""`[tool.ngrules]` in the nearest `pyproject.toml`: project settings the command line and the
pytest plugin share (which modules register ops, which rules files are the project's)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from ngrules.errors import NgrulesError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

KNOWN_KEYS = frozenset({"ops", "rules"})


@dataclass(frozen=True)
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


def load_config(start: Path | str = ".") -> ProjectConfig:
    """The `[tool.ngrules]` table of the nearest pyproject.toml (empty when there is none)."""
    path = find_pyproject(start)
    if path is None:
        return ProjectConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise NgrulesError(f"{path}: cannot read [tool.ngrules]: {e}") from None
    table = data.get("tool", {}).get("ngrules", {})
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise NgrulesError(
            f"{path}: unknown key(s) in [tool.ngrules]: {', '.join(unknown)} "
            f"(known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    return ProjectConfig(path, _strings(path, table, "ops"), _strings(path, table, "rules"))


def _strings(path: Path, table: dict, key: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise NgrulesError(f"{path}: [tool.ngrules] {key} must be a list of strings")
    return tuple(value)
