"""Every command that reads a model, given ONNX mutants (`onnx_fuzz.mutate`) and the originals:
each ends with a result or a line `ngrules: ...error: ...` on stderr, never an exception out of
the command (a traceback), within seconds (issues 20 and 25). In process, through
`ngrules.cli.main.main`; run this file for a campaign and its figures:

    python tests/onnx_cli_fuzz.py --count 500 --seed N
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import resource
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnx_fuzz

from ngrules.cli.main import main as ngrules_main

RULES = str(Path(__file__).parent.parent / "rules")  # the shipped library


def _lengths(data: bytes) -> list[str]:
    """--length options for the model's symbolic dimensions the fuzzer knows."""
    try:
        model = onnx.load_model_from_string(data)
    except Exception:
        return []
    values = [*model.graph.input, *model.graph.output, *model.graph.value_info]
    dims = {d.dim_param for v in values for d in v.type.tensor_type.shape.dim if d.dim_param}
    return [f"--length={k}={v}" for k, v in onnx_fuzz.LENGTHS.items() if k in dims]


def write_feeds(data: bytes, folder: str) -> list[str]:
    """--feed options: a random .npy for each input of the (original) model."""
    model = onnx.load_model_from_string(data)
    inits = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        shape = [d.dim_value or onnx_fuzz.LENGTHS.get(d.dim_param, 2) for d in dims]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        value = rng.standard_normal(shape) if dtype.kind == "f" else np.zeros(shape)
        path = os.path.join(folder, f"feed{len(feeds)}.npy")
        np.save(path, value.astype(dtype))
        feeds.append(f"--feed={vi.name}={path}")
    return feeds


def commands(model: str, out: str, lengths: list[str], feeds: list[str]) -> dict[str, list]:
    """Each command that reads an ONNX model (and those that must refuse one), its argv."""
    return {
        "import": ["import", model, "-o", f"{out}.json", *lengths],
        "show": ["show", model, *lengths],
        "apply": ["apply", model, "-o", f"{out}.onnx", *lengths],
        "apply-json": ["apply", model, "-o", f"{out}-a.json", *lengths, "--pipeline", "cpu"],
        "export": ["export", model, "-o", f"{out}-e.onnx", *lengths],
        "run": ["run", model, *lengths, *feeds, "-o", f"{out}.npz"],
        "coverage": ["coverage", RULES, model, *lengths],
        "explain": ["explain", "relu_fprop", model, *lengths],
        "verify": ["verify", model],
        "check": ["check", model],
    }


def run_command(argv: list[str]) -> tuple[str, str]:
    """("ok" | "refused" | "crash", detail) of one command, in process."""
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = ngrules_main(argv)
    except SystemExit as e:  # argparse
        code = e.code
    except (Exception, RecursionError, MemoryError):
        return "crash", traceback.format_exc(limit=-6)
    text = err.getvalue().strip() + "\n" + out.getvalue().strip()
    if "Traceback" in text:
        return "crash", text[-2000:]
    if code == 0:
        return "ok", ""
    # `check` adds a count of its located errors; `coverage` says which models it did not read
    lines = [line for line in text.splitlines() if "error:" in line or ": not read: " in line]
    if not lines:
        return "crash", f"exit {code} without an error line: {text[-2000:]!r}"
    return "refused", lines[-1]


@dataclass
class CliCampaign:
    runs: int = 0
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)
    crashes: list[str] = field(default_factory=list)
    slowest: float = 0.0
    slowest_name: str = ""


def campaign(count: int, seed: int = 0, models: dict[str, bytes] | None = None,
             originals: bool = False) -> CliCampaign:
    """count mutants (and with `originals` every model itself), each through every command."""
    models = models if models is not None else onnx_fuzz.seeds()
    names = sorted(models)
    result = CliCampaign()
    with tempfile.TemporaryDirectory() as tmp:
        feeds = {}
        for name in names:
            os.makedirs(os.path.join(tmp, name))
            feeds[name] = write_feeds(models[name], os.path.join(tmp, name))
        cases = [(n, models[n]) for n in names] if originals else []
        for i in range(count):
            name = names[i % len(names)]
            cases.append((f"{name} #{i}", onnx_fuzz.mutate(random.Random(seed * 1_000_003 + i),
                                                            models[name])))
        for label, data in cases:
            path = os.path.join(tmp, "m.onnx")
            Path(path).write_bytes(data)
            base = label.split(" ")[0]
            argvs = commands(path, os.path.join(tmp, "out"), _lengths(data), feeds[base])
            for command, argv in argvs.items():
                start = time.perf_counter()
                status, detail = run_command(argv)
                took = time.perf_counter() - start
                result.runs += 1
                counts = result.outcomes.setdefault(command, {})
                counts[status] = counts.get(status, 0) + 1
                if took > result.slowest:
                    result.slowest, result.slowest_name = took, f"{command} {label}"
                if status == "crash":
                    result.crashes.append(f"{command} {label} (seed {seed}): {detail}")
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--originals", action="store_true", help="the unmutated models too")
    p.add_argument("--max-gb", type=float, default=6,
                   help="address space allowed (`run` of a mutant may compute huge values: "
                        "numpy's MemoryError, not the machine's out-of-memory killer)")
    args = p.parse_args(argv)
    limit = int(args.max_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    start = time.perf_counter()
    result = campaign(args.count, args.seed, originals=args.originals)
    print(f"{result.runs} command runs in {time.perf_counter() - start:.0f} s; "
          f"{len(result.crashes)} crashes; slowest {result.slowest:.2f} s "
          f"({result.slowest_name}); peak RSS {onnx_fuzz.peak_rss_mb():.0f} MB")
    for command, counts in result.outcomes.items():
        print(f"  {command}: {counts}")
    for crash in result.crashes[:20]:
        print("---", crash, sep="\n")
    return 1 if result.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
