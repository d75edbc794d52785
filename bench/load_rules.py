"""Rule loading time: parse + check of a generated 1,000-rule file (target: under one second).

Run: python bench/load_rules.py [rules]   (prints the median of several runs)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from ngrules.lang.loader import load_rules

TEMPLATES = [
    "rule mul_one_{i}: Multiply(x, {i}) => x",
    "rule log_exp_{i}: Log(Exp(a)) * {i} => a",
    "rule named_{i}:\n    d @ Dot(x, y)\n    if len(d.reduction_axes) == {i} and not is_scalar(x)\n"
    "    let u = new_axis({i})\n    => Dot(broadcast(x, x.axes + u), broadcast(y, u + y.axes))",
    "rule shared_{i}:\n    Add(Multiply(h, y), Multiply(h, z)) + {i}\n"
    "    where h = Exp(x: scalar)\n    => Multiply(h, Add(y, z))",
    "rule opt_{i} priority {i}: Broadcast?(c: constant) * Sqrt(x) - {i} => x * c",
]


def generate(count: int) -> str:
    """count rules, cycling through the templates, in passes of 100."""
    lines = []
    for i in range(count):
        if i % 100 == 0:
            lines.append(f"\npass p{i // 100}")
        lines.append(TEMPLATES[i % len(TEMPLATES)].format(i=i))
    return "\n".join(lines) + "\n"


def main(count: int = 1000, runs: int = 7) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "generated.rules"
        path.write_text(generate(count))
        load_rules(path)  # build the parser once, as any process does
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            rules = load_rules(path)
            times.append(time.perf_counter() - start)
    median = statistics.median(times)
    size = len(generate(count)) // 1024
    print(
        f"load_rules (parse + check): {len(rules)} rules, {size} KiB, "
        f"median {median * 1000:.0f} ms over {runs} runs (target < 1000 ms)"
    )
    return median


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
