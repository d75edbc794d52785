"""Graph file loading scales linearly in the number of arrays.

Loads a graph of N one-element constants and of 8N, and prints the time per constant of each
and their ratio (about 1 when loading is linear; it was about 8 when each array was found by
scanning a list of the archive's members).

Run: python bench/graphfile.py [N]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ngrules.ir.axes import Axis
from ngrules.ir.frontend import constant
from ngrules.ir.graphfile import load_graph, save_graph


def per_constant(count: int, folder: Path) -> float:
    """Seconds per constant to load a saved graph of `count` distinct constants."""
    k = Axis("K", 1)
    path = folder / f"c{count}.json"
    save_graph(path, [constant(np.array([float(i)]), [k], np.float64) for i in range(count)])
    start = time.perf_counter()
    loaded = load_graph(path)
    seconds = time.perf_counter() - start
    assert len(loaded) == count
    return seconds / count


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    small = int(argv[0]) if argv else 2000
    with tempfile.TemporaryDirectory() as tmp:
        a, b = per_constant(small, Path(tmp)), per_constant(8 * small, Path(tmp))
    print(f"{small:7d} constants: {a * 1e6:8.1f} us each")
    print(f"{8 * small:7d} constants: {b * 1e6:8.1f} us each")
    print(f"ratio (8x the arrays, per array): {b / a:.2f}")
    return {"small": a, "large": b, "ratio": b / a}


if __name__ == "__main__":
    main()
