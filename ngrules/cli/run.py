"""`ngrules run GRAPH --feed x=x.npy ...`: execute a graph file and print or save its outputs."""

from __future__ import annotations

import sys

import numpy as np

from ngrules.cli.common import add_command, add_graph_argument, at_least, load_graph_argument
from ngrules.errors import NgrulesError


def _feeds(items: list[str]) -> dict[str, np.ndarray]:
    feeds = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise NgrulesError(f"--feed {item!r}: write NAME=FILE.npy")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise NgrulesError(f"--feed {name}: cannot read {path}: {e}") from None
    return feeds


def run(args) -> int:
    from ngrules.cli import graphio
    from ngrules.ir.executor import execute
    from ngrules.ir.fileio import check_outputs, staged_files

    if args.output is not None:  # before any work: never an input, never a folder, never ""
        feeds = [item.partition("=")[2] for item in args.feed]
        check_outputs([args.output], [*graphio.files(args.graph), *feeds])
    outputs, names = load_graph_argument(args)
    values = execute(outputs, _feeds(args.feed))
    named_outputs = (  # np.savez's own parameter names cannot be keys
        bool(names) and len(set(names)) == len(outputs) and all(names)
        and not {"file", "allow_pickle"} & set(names))
    keys = list(names) if named_outputs else [f"output{i}" for i in range(len(outputs))]
    labels = [f"output {k}" for k in names] if named_outputs else [
        f"output {i}" for i in range(len(outputs))]
    if args.output is not None:
        named = {k: np.asarray(v) for k, v in zip(keys, values)}
        with staged_files() as stage:
            stage(args.output, lambda f: np.savez(f, **named))
        print(f"saved {len(values)} output(s) to {args.output} as " + ", ".join(named))
        return 0
    with np.printoptions(threshold=args.max_items, linewidth=100):
        for label, node, value in zip(labels, outputs, values):
            print(f"{label}: {node.op} {node.axes!r} {np.asarray(value).dtype}")
            print(np.array2string(np.asarray(value)), file=sys.stdout)
    return 0


def register(sub) -> None:
    p = add_command(
        sub, "run", run, "execute a graph file on the given inputs; print or save its outputs",
        "ngrules run g.json --feed x=x.npy -o out.npz",
    )
    add_graph_argument(p)
    p.add_argument("--feed", action="append", default=[], metavar="NAME=FILE.npy",
                   help="the value of placeholder NAME, from a .npy file (repeatable)")
    p.add_argument("-o", "--output", metavar="OUT.npz",
                   help="save the outputs in an .npz instead: output0, output1, ... for a "
                        "graph file, its output names for an ONNX model")
    p.add_argument("--max-items", type=at_least(0), default=1000,
                   help="print arrays in full up to this many items (default 1000)")
