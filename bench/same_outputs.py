"""Does a change leave `ngrules apply`'s output files byte for byte as they were? Each model of a
folder goes through `ngrules apply` in a fresh process with no rules and with each named
pipeline; the digests of the written files are saved (`--save`) or compared with saved ones
(`--compare`), so a speed change can show its outputs did not move (the zoo's figures then hold
for it without running the zoo again).

Run: `python bench/same_outputs.py --models DIR --save refs.json [--tree PATH]`, later
`python bench/same_outputs.py --models DIR --compare refs.json --tree PATH/OF/CHANGE`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def apply_digest(tree: Path, model: Path, pipeline: str, out: Path) -> str:
    """The digest of the file `ngrules apply` writes, or the command's last error line."""
    rules = ["--no-rules"] if pipeline == "none" else ["--pipeline", pipeline]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-P", "-m", "ngrules.cli.main", "apply", str(model),
                           *rules, "-o", str(out), "-q"], capture_output=True, text=True,
                          env=env, cwd=tree)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["(no message)"]
        return f"error {proc.returncode}: {lines[-1][:200]}"
    try:
        return digest(out)
    finally:
        out.unlink()


def digests(tree: Path, models: list[Path], pipelines: list[str]) -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix="ngrules-same-") as folder:
        out = Path(folder) / "out.onnx"
        return {f"{m.name} {p}": apply_digest(tree, m, p, out) for m in models for p in pipelines}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, required=True, help="a folder of .onnx files")
    parser.add_argument("--only", default=None, help="only these file names (comma-separated)")
    parser.add_argument("--pipelines", default="none,cpu,inference")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the ngrules tree to run")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path)
    group.add_argument("--compare", type=Path)
    args = parser.parse_args(argv)
    models = sorted(args.models.glob("*.onnx"))
    if args.only:
        models = [m for m in models if m.name in args.only.split(",")]
    found = digests(args.tree.resolve(), models, args.pipelines.split(","))
    if args.save:
        args.save.write_text(json.dumps(found, indent=1, sort_keys=True))
        print(f"saved {len(found)} digests ({len(models)} models)")
        return 0
    kept = json.loads(args.compare.read_text())
    moved = [k for k, v in found.items() if kept.get(k) != v]
    for key in moved:
        print(f"moved: {key}: {kept.get(key, '(not saved)')[:40]} -> {found[key][:40]}")
    print(f"same: {len(found) - len(moved)}/{len(found)} (model x pipeline)")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
