"""The grammar's text and what a cache of parsed files is keyed by, without importing lark:
a command that reads every rules file from the cache (`code_cache.parse_kept`) never
imports lark (30-40 ms of a short `ngrules apply`)."""

from __future__ import annotations

import functools
import hashlib
from importlib import resources
from pathlib import Path


@functools.lru_cache(maxsize=1)
def grammar_text() -> str:
    """The grammar, from the installed package or else from a source checkout (read once per
    process: every rules file's cache key names it)."""
    packaged = resources.files("ngrules").joinpath("grammar/ngrules.lark")
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return (Path(__file__).parents[2] / "grammar" / "ngrules.lark").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def lark_digest() -> str:
    """A digest of the installed lark's `__init__.py` (which holds its version), found
    without importing it; "" where it cannot be read (the parser then says lark is missing)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("lark")
        origin = spec.origin if spec is not None else None
        data = Path(origin).read_bytes() if origin else b""
    except (ImportError, ValueError, OSError):
        data = b""
    return hashlib.sha256(data).hexdigest()[:16] if data else ""
