"""What the `ngrules` program's own process sets before numpy loads (the package imports this
module first).

numpy's OpenBLAS starts its worker threads as it loads, and each then spins 2**28 CPU cycles
waiting for work before it sleeps (again after every threaded BLAS call): through a command's
start, ~50 ms of CPU per `ngrules apply` to ResNet-50, taken from the other processes of the
machine (issue 34). `OPENBLAS_THREAD_TIMEOUT=4` has them sleep at once: the same threads do
the same work, so results are the same; only their idling is shorter. A value the user set is
kept, and a process that imports ngrules as a library keeps its environment as it was.
"""

from __future__ import annotations

import os
import sys

#: Read by OpenBLAS when numpy loads: an idle worker spins 2**4 cycles, not 2**28, then sleeps.
BLAS_SETTINGS = {"OPENBLAS_THREAD_TIMEOUT": "4"}


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


def set_up() -> None:
    """The program's settings, in its own process only."""
    if is_the_program():
        for name, value in BLAS_SETTINGS.items():
            os.environ.setdefault(name, value)


set_up()
