"""Symbolic-dimension models through `ngrules apply` (issue 34, items 2 and 4): for each model
that `bench/export_transformers.py` wrote and each of no rules and the shipped pipelines, run
the command line, then check the written model keeps the input's and output's `dim_param`s and
computes what the input computes under onnxruntime at two (batch, sequence) shapes; print node
counts in and out and the op types that differ.

Run: `python bench/symbolic_round_trip.py [--dir /tmp/ngr-tf] [--only bert_mask_dynamo ...]
[--tree ANOTHER_TREE]`
(a developer measurement, not run by CI; the models are large files never committed).
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODES = ["no-rules", "cpu", "fuse_nn", "inference"]
SHAPES = [(1, 5), (3, 11)]


def _dims(values) -> list:
    return [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in values]


def _feeds(model, batch: int, seq: int, rng) -> dict:
    """Random inputs: token ids below 100, a mask with zeros at the end of the last row."""
    feeds = {}
    for vi in model.graph.input:
        shape = [batch if d.dim_param == "batch" else seq if d.dim_param == "seq" else d.dim_value
                 for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == 7:
            value = rng.integers(0, 100, shape).astype(np.int64)
            if "mask" in vi.name:
                value = np.ones(shape, np.int64)
                value[-1, max(1, seq - 2):] = 0
            elif "type" in vi.name:
                value = np.zeros(shape, np.int64)
        else:
            value = rng.standard_normal(shape).astype(np.float32)
        feeds[vi.name] = value
    return feeds


def _run(path: Path, feeds: dict) -> list:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def measure(path: Path, mode: str, out: Path, tree: Path = ROOT) -> dict:
    import onnx

    args = ["--no-rules"] if mode == "no-rules" else ["--pipeline", mode]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", "from ngrules.cli import main; main()", "apply",
                           str(path), *args, "-o", str(out)], env=env, capture_output=True,
                          text=True, cwd=tree)  # (`-c` reads the working folder first)
    row = {"model": path.stem, "mode": mode}
    if done.returncode != 0:
        row["error"] = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return row
    model = onnx.load(str(path), load_external_data=False)
    written = onnx.load(str(out), load_external_data=False)
    ops_in = collections.Counter(n.op_type for n in model.graph.node)
    ops_out = collections.Counter(n.op_type for n in written.graph.node)
    row.update(nodes_in=len(model.graph.node), nodes_out=len(written.graph.node),
               more=dict(ops_out - ops_in), fewer=dict(ops_in - ops_out),
               dims=_dims(model.graph.input) == _dims(written.graph.input)
               and _dims(model.graph.output) == _dims(written.graph.output))
    diffs = []
    for batch, seq in SHAPES:
        feeds = _feeds(model, batch, seq, np.random.default_rng(0))
        want, got = _run(path, feeds), _run(out, feeds)
        diffs.append(max(float(np.max(np.abs(w - g))) for w, g in zip(want, got)))
    row["diff"] = max(diffs)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/ngr-tf")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--modes", nargs="*", default=MODES)
    parser.add_argument("--tree", default=str(ROOT), help="the ngrules tree to run (a revision's)")
    args = parser.parse_args()
    paths = sorted(Path(args.dir).glob("*.onnx"))
    print("| model | mode | nodes in | nodes out | dim_params | max abs diff | ops out - in "
          "| ops in - out |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            if args.only and path.stem not in args.only:
                continue
            for mode in args.modes:
                row = measure(path, mode, Path(tmp) / "out.onnx", Path(args.tree))
                if "error" in row:
                    print(f"| {row['model']} | {row['mode']} | error: {row['error']} |")
                else:
                    print(f"| {row['model']} | {row['mode']} | {row['nodes_in']} | "
                          f"{row['nodes_out']} | {'kept' if row['dims'] else 'LOST'} | "
                          f"{row['diff']:.2g} | {row['more'] or ''} | {row['fewer'] or ''} |",
                          flush=True)


if __name__ == "__main__":
    main()
