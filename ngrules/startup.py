"""The settings of the `ngrules` program's own process, made before numpy and the rest of
ngrules load (the package imports this module first); a process that imports ngrules as a
library keeps its environment and garbage collector as they were.

- numpy's OpenBLAS starts its worker threads as it loads, and each then spins 2**28 CPU cycles
  waiting for work before it sleeps (again after every threaded BLAS call): through a command's
  start, ~50 ms of CPU per `ngrules apply` to ResNet-50, taken from the main thread and the
  machine's other processes (issue 34). `OPENBLAS_THREAD_TIMEOUT=4` has them sleep at once: the
  same threads do the same work, so results are the same; only their idling is shorter. A value
  the user set is kept.
- The cyclic garbage collector looks at young objects every 200,000 allocations rather than 700
  (`GC_THRESHOLD`): the imports make tens of thousands of objects that live as long as the
  process, and a model's graph hundreds of thousands; each collection walks every young object
  (7 ms for 50,000). An apply to ResNet-50 or VGG-19 now runs none (at 50,000 set after the
  imports, two in ResNet-50's, 14 ms), its peak memory unchanged (`cli.main.as_program` sets
  the threshold again for a process that runs a command otherwise).
"""

from __future__ import annotations

import gc
import os
import sys

#: Read by OpenBLAS when numpy loads: an idle worker spins 2**4 cycles, not 2**28, then sleeps.
BLAS_SETTINGS = {"OPENBLAS_THREAD_TIMEOUT": "4"}
#: The program's threshold for a collection of young objects (Python's default: 700).
GC_THRESHOLD = 200_000


def is_the_program() -> bool:
    """Whether this process runs ngrules' command line: its script (`ngrules ...`), or
    `python -m ngrules.cli.main` (the package is imported while `sys.argv[0]` is "-m")."""
    argv = getattr(sys, "argv", None) or [""]
    if argv[0] == "-m":
        module = _module_run()
        return module == "ngrules" or module.startswith("ngrules.")
    return os.path.basename(argv[0]) in ("ngrules", "ngrules.exe")


def _module_run() -> str:
    """The module named by `-m` on the interpreter's command line ("" if none)."""
    args = getattr(sys, "orig_argv", [])[1:]
    for i, arg in enumerate(args):
        if arg.startswith("-m"):
            return arg[2:] or (args[i + 1] if i + 1 < len(args) else "")
    return ""


def as_the_program() -> None:
    """Make this process's settings the program's (see the module docstring)."""
    for name, value in BLAS_SETTINGS.items():
        os.environ.setdefault(name, value)
    gc.set_threshold(GC_THRESHOLD)


if is_the_program():
    as_the_program()
