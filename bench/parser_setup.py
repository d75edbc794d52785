"""Parser setup per process: building the LALR tables from the grammar vs loading them from
the private cache (`ngrules/lang/parser_cache.py`). Each run is a fresh Python process.

Run: python bench/parser_setup.py [runs]   (prints the medians and their ratio)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

_CODE = (
    "import time; from ngrules.lang import parser; t = time.perf_counter(); parser._parser(); "
    "print(time.perf_counter() - t)"
)


def _setup_seconds(cache_home: str) -> float:
    env = {**os.environ, "XDG_CACHE_HOME": cache_home}
    out = subprocess.run([sys.executable, "-c", _CODE], env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out)


def main(runs: int = 5) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        _setup_seconds(tmp)  # fill the cache
        cached = statistics.median(_setup_seconds(tmp) for _ in range(runs))
        # a relative XDG_CACHE_HOME is ignored (XDG spec): no cache, the tables are built
        built = statistics.median(_setup_seconds("relative") for _ in range(runs))
    print(f"parser setup: built {built * 1e3:.0f} ms, from the private cache "
          f"{cached * 1e3:.0f} ms, ratio {built / cached:.1f}x")
    return {"built": built, "cached": cached}


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
