"""Graph files by extension: `.onnx` through the ONNX interop (the `onnx` extra), anything
else as ngrules' JSON graph format. Commands that read or write graphs go through here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ngrules.ir.graph import Node


def is_onnx(path: str) -> bool:
    return Path(path).suffix.lower() == ".onnx"


def load(path: str, lengths: dict[str, int] | None = None) -> tuple[list[Node], list[str] | None]:
    """The graph's outputs, and their names when the file is an ONNX model."""
    if is_onnx(path):
        from ngrules.interop.onnx.importer import import_model

        imported = import_model(path, lengths=lengths)
        return imported.outputs, imported.output_names
    from ngrules.errors import NgrulesError
    from ngrules.ir.graphfile import load_graph

    if lengths:
        raise NgrulesError(f"--length {next(iter(lengths))}: {path} is a graph file, whose "
                           "axes have their lengths (--length is for ONNX models)")
    return load_graph(path), None


def load_all(paths: Sequence[str], lengths: dict[str, int]) -> dict[str, list[Node]]:
    """Several graphs: each ONNX model gets the lengths of its own symbolic dimensions, and
    every length given must name a dimension of some model."""
    from ngrules.errors import NgrulesError

    dims = {p: _symbolic_dims(p) for p in paths}
    unused = sorted(set(lengths) - set().union(*dims.values()))
    if unused:
        raise NgrulesError(f"--length {unused[0]}: no model given has a symbolic dimension "
                           f"of that name")
    return {p: load(p, {k: v for k, v in lengths.items() if k in dims[p]})[0] for p in paths}


def _symbolic_dims(path: str) -> set[str]:
    if not is_onnx(path):
        return set()
    from ngrules.interop.onnx.importer import symbolic_dims

    return symbolic_dims(path)


def files(path: str) -> list:
    """The files a graph at `path` occupies: an ONNX model, or the JSON and its arrays."""
    if is_onnx(path):
        return [path]
    from ngrules.ir.graphfile import arrays_path

    return [path, arrays_path(path)]


def output_files(path: str) -> list:
    """The files a graph written to `path` occupies, once `path` is checked to be writable
    (first: "" or "/" have no arrays file to name)."""
    from ngrules.ir.fileio import check_output

    check_output(path)
    return files(path)


def check_graph_output(path: str) -> None:
    """A graph is written as `.json` (a graph file) or `.onnx` (a model), by extension: any
    other name (`out.txt`) is refused rather than written in a format its name hides."""
    from ngrules.errors import NgrulesError

    if Path(path).suffix.lower() not in (".json", ".onnx"):
        raise NgrulesError(f"{path}: a graph is written to a .json file (ngrules' graph format) "
                           "or a .onnx file (an ONNX model)")


def stage_any(stage, path: str, outputs: Sequence[Node], names: Sequence[str] | None = None):
    """Stage the graph at `path` (with `stage` from `staged_files`): an ONNX model (checked)
    for `.onnx`, else a graph file."""
    if is_onnx(path):
        from ngrules.interop.onnx.exporter import to_onnx
        from ngrules.ir.fileio import check_output

        check_output(path)
        model = to_onnx(outputs, output_names=names)
        stage(Path(path), lambda f: f.write(model.SerializeToString()))
        return
    from ngrules.ir.graphfile import stage_graph

    stage_graph(stage, path, outputs)


def save(path: str, outputs: Sequence[Node], names: Sequence[str] | None = None) -> None:
    """Write the graph to `path`: an ONNX model for `.onnx`, else a graph file."""
    from ngrules.ir.fileio import staged_files

    with staged_files() as stage:
        stage_any(stage, path, outputs, names)


def parse_lengths(items: Sequence[str] | None) -> dict[str, int]:
    """`NAME=LENGTH` pairs (symbolic ONNX dimensions) as a dict."""
    from ngrules.errors import NgrulesError

    out: dict[str, int] = {}
    for item in items or ():
        name, _, value = item.partition("=")
        if not name or not value.isdigit() or int(value) < 1:
            raise NgrulesError(f"--length expects NAME=LENGTH with a positive length, got {item!r}")
        out[name] = int(value)
    return out
