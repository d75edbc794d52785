"""The command's own speed on classic networks (issue 34, item 6): `ngrules apply --pipeline
inference -o out.onnx` on ResNet-50 and VGG-19 at opset 9, each in a fresh process, beside
onnxsim and onnxruntime's offline optimizer on the same files.

The models are the onnx package's light networks (`onnx/backend/test/data/light`, opset 9)
with random weights in place of their constant fills (each `ConstantOfShape` that makes a
weight becomes an initializer of random float32, as `export_zoo_broad.classic` writes them),
written once under the temp folder
(`ngrules-bench-models/`). Each tool runs `--rounds` times in a fresh process (interleaved);
wall and CPU seconds (min and median; on a loaded machine wall is CPU times the queue) and
peak resident memory (`/usr/bin/time`'s maximum RSS, over
the model file's size) are reported, with the load average, since the machine is shared.
onnxsim runs from `--other-python` (a separate environment that has it; skipped if absent);
onnxruntime's offline optimizer is a session with `optimized_model_filepath`, at the basic
level and at all (`ort-basic`, `ort-all`).
With `--base TREE` (a checkout of another revision, e.g. `git archive REV | tar -x -C TREE`)
the same command also runs from that tree (`ngrules-base`), taking turns with this one.
The tools run in reverse order every other round (a tool run right after another pays for
what that one left behind, such as its file's writeback), and ngrules' wall time is compared
with each other tool's of the same round: the median difference and in how many rounds it
was faster.
Run: `python bench/tool_speed.py [--models resnet50,vgg19] [--rounds 5]
[--other-python /work/torchenv/bin/python] [--base TREE] [--tools ngrules,ngrules-base]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def model_file(name: str) -> Path:
    """The light network with random weights (written once, by export_zoo_broad.classic)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from export_zoo_broad import classic

    folder = Path(tempfile.gettempdir()) / "ngrules-bench-models"
    folder.mkdir(exist_ok=True)
    path = folder / f"classic_{name}_op9.onnx"
    return path if path.exists() else classic(name, folder)


def _ort_optimize(src: str, dst: str, level: str) -> list[str]:
    code = ("import onnxruntime as ort, sys; o = ort.SessionOptions(); "
            f"o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_{level}; "
            "o.optimized_model_filepath = sys.argv[2]; "
            "ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider'])")
    return [sys.executable, "-c", code, src, dst]


def _ngrules(path: Path, out: Path, tree: Path = ROOT) -> list[str]:
    return ["env", f"PYTHONPATH={tree}", sys.executable, "-P", "-m", "ngrules.cli.main", "apply",
            str(path), "--pipeline", "inference", "-o", str(out)]


def commands(path: Path, out: Path, other_python: str | None,
             base: Path | None = None) -> dict[str, list[str]]:
    cmds = {
        "ngrules": _ngrules(path, out / "ngrules.onnx"),
        **({"ngrules-base": _ngrules(path, out / "base.onnx", base)} if base else {}),
        "ort-basic": _ort_optimize(str(path), str(out / "ort.onnx"), "BASIC"),
        "ort-all": _ort_optimize(str(path), str(out / "ort_all.onnx"), "ALL"),
    }
    if other_python and subprocess.run([other_python, "-c", "import onnxsim"],
                                       capture_output=True).returncode == 0:
        cmds["onnxsim"] = [other_python, "-m", "onnxsim", str(path), str(out / "sim.onnx")]
    return cmds


def timed(cmd: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak resident MB) of one run in a fresh process, as an
    installed tool runs: bytecode cached (PYTHONDONTWRITEBYTECODE unset)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", *cmd], capture_output=True,
                            text=True, env=env, cwd=ROOT)
    if result.returncode != 0:
        raise RuntimeError(f"{cmd[:4]}...: {result.stderr[-500:]}")
    wall, user, system, kb = result.stderr.strip().splitlines()[-1].split()
    return float(wall), float(user) + float(system), int(kb) / 1024


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,vgg19")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--other-python", default="/work/torchenv/bin/python")
    parser.add_argument("--tools", default=None, help="only these (comma-separated)")
    parser.add_argument("--base", type=Path, default=None,
                        help="a tree of another revision, run as `ngrules-base`")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ngrules-speed-") as folder:  # GBs of outputs
        _measure(args, Path(folder))


def _measure(args, out: Path) -> None:
    print(f"load average before: {os.getloadavg()}")
    for name in args.models.split(","):
        path = model_file(name)
        size = path.stat().st_size / 2**20
        cmds = commands(path, out, args.other_python, args.base)
        if args.tools:
            cmds = {k: v for k, v in cmds.items() if k in args.tools.split(",")}
        runs: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cmds}
        for cmd in cmds.values():  # warm: bytecode and caches written, the file in memory
            timed(cmd)
        for i in range(args.rounds):
            for tool, cmd in (cmds.items() if i % 2 == 0 else reversed(cmds.items())):
                runs[tool].append(timed(cmd))
        for tool, rows in runs.items():
            walls, cpus = [r[0] for r in rows], [r[1] for r in rows]
            peak = max(r[2] for r in rows)
            print(f"{name} ({size:.0f} MB) {tool:12s} wall min {min(walls):.2f} s, median "
                  f"{statistics.median(walls):.2f} s; CPU min {min(cpus):.2f} s, median "
                  f"{statistics.median(cpus):.2f} s; peak RSS {peak:.0f} MB "
                  f"({peak / size:.2f}x the file); load {os.getloadavg()[0]:.1f}")
        _print_paired(name, runs)
    print(f"load average after: {os.getloadavg()}")


def _print_paired(name: str, runs: dict[str, list[tuple[float, float, float]]]) -> None:
    """ngrules' wall time against each other tool's in the same round."""
    if "ngrules" not in runs:
        return
    for tool, rows in runs.items():
        if tool == "ngrules":
            continue
        diffs = [a[0] - b[0] for a, b in zip(runs["ngrules"], rows)]
        print(f"{name} ngrules - {tool}: median {statistics.median(diffs):+.3f} s a round; "
              f"faster in {sum(d < 0 for d in diffs)}, slower in {sum(d > 0 for d in diffs)} "
              f"of {len(diffs)} rounds")


if __name__ == "__main__":
    main()
