"""The rule library that ships with ngrules (`rules/` in the source tree)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ngrules.lang.rules import RuleSet


def library_path() -> Path:
    """The folder of the shipped `.rules` files: inside the installed package, else the repo's."""
    packaged = resources.files("ngrules").joinpath("library")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).parents[2] / "rules"


def load_library() -> RuleSet:
    """Every rule of the shipped library, with its passes and pipelines (such as `cpu`)."""
    from ngrules.lang.loader import load_rules

    return load_rules(library_path())


def short_location(location: str) -> str:
    """`rules/dot.rules:12` for a location in the shipped library, else the location as is."""
    root = str(library_path())
    if location.startswith(root):
        return "rules" + location[len(root):]
    return location
