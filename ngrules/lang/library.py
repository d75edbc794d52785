"""The rule library that ships with ngrules (`rules/` in the source tree)."""

from __future__ import annotations

from ngrules.lang.rules import RuleSet
from ngrules.lang.shipped import library_path, short_location

__all__ = ["library_path", "load_library", "short_location"]


def load_library() -> RuleSet:
    """Every rule of the shipped library, with its passes and pipelines (such as `cpu`),
    from wherever ngrules is installed. A rules file gets one of its files with
    `import "ngrules:cpu.rules"`."""
    from ngrules.lang.loader import load_rules

    return load_rules(library_path())
