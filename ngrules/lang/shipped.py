"""Where the shipped rule library lives, `import "ngrules:cpu.rules"` resolved into it, and
how locations in it are shown.

Shipped rules print as `ngrules:rules/dot.rules:12` wherever a location is shown (traces,
reports, explanations, pictures), whether ngrules runs from site-packages or a checkout, so a
location reads the same on every machine; user rules keep their own paths.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

#: The prefix shipped rules' locations carry instead of their folder.
LOCATION_PREFIX = "ngrules:rules"

#: An import path starting with this names a file of the shipped library, from any folder.
LIBRARY_PREFIX = "ngrules:"


@functools.lru_cache(maxsize=1)
def library_path() -> Path:
    """The folder of the shipped `.rules` files: inside the installed package, else the repo's
    (found once per process: every shipped rule's location asks, 0.1 ms each)."""
    packaged = resources.files("ngrules").joinpath("library")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).parents[2] / "rules"


def short_location(location: str) -> str:
    """`ngrules:rules/dot.rules:12` for a location in the shipped library, else as given."""
    root = str(library_path())
    if location.startswith(root + "/") or location.startswith(root + "\\"):
        return LOCATION_PREFIX + "/" + location[len(root) + 1 :].replace("\\", "/")
    return location


def library_import(path: str) -> str | None:
    """The file `import "ngrules:NAME.rules"` means, or None when `path` is not a library
    import. Only a plain file name of the library is accepted (no folders, no `..`)."""
    if not path.startswith(LIBRARY_PREFIX):
        return None
    name = path[len(LIBRARY_PREFIX) :]
    plain = name and not any(c in name for c in "/\\") and not name.startswith(".")
    if not plain or not name.endswith(".rules"):
        return ""
    return str(library_path() / name)
