"""Graph files by extension: `.onnx` through the ONNX interop (the `onnx` extra), anything
else as ngrules' JSON graph format. Commands that read or write graphs go through here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ngrules.ir.graph import Node


def is_onnx(path: str) -> bool:
    return Path(path).suffix.lower() == ".onnx"


def load(
    path: str, lengths: dict[str, int] | None = None, symbolic: bool = False
) -> tuple[list[Node], list[str] | None]:
    """The graph's outputs, and their names when the file is an ONNX model (with `symbolic`,
    its dimensions given no length stay symbolic: see `interop.onnx.dynamic`)."""
    if is_onnx(path):
        from ngrules.interop.onnx.importer import import_model

        imported = import_model(path, lengths=lengths, symbolic=symbolic)
        return imported.outputs, imported.output_names
    from ngrules.ir.graphfile import load_graph

    return load_graph(path), None


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
