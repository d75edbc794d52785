"""Graph files by suffix: `.onnx` through the ONNX interop (the `onnx` extra), anything else
as ngrules' JSON graph format. Every command reads graphs with `load` and writes them with
`save` (or `stage_any`): none chooses a format of its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ngrules.ir.graph import Node
from ngrules.records import frozen

if TYPE_CHECKING:
    from ngrules.budget import Budget


@frozen
class ReadOptions:
    """How to read an ONNX model: lengths of symbolic dimensions, axis names for inputs, the
    budget for constants computed while importing (None: the importer's default)."""

    lengths: Mapping[str, int] = field(default_factory=dict)
    axis_names: Mapping[str, Sequence[str | None]] = field(default_factory=dict)
    max_constant_bytes: int | None = None
    # a dimension given no length stays symbolic (`interop.onnx.exporting.dynamic`)
    symbolic: bool = False
    budget: Budget | None = None  # the whole import's (None: `interop.onnx.budget`'s default)


def is_onnx(path: str) -> bool:
    return Path(path).suffix.lower() == ".onnx"


def load(path: str, options: ReadOptions | None = None) -> tuple[list[Node], list[str] | None]:
    """The graph's outputs, and their names when the file is an ONNX model."""
    outputs, names, _ = load_with_opset(path, options)
    return outputs, names


def written_opset(asked: int | None, model: int | None) -> int | None:
    """The opset a graph read from a model of opset `model` (None: not from a model) is written
    at: the one asked for (`--opset`), else the model's own within what the exporter writes
    (up to the installed onnx's latest; below 17 in each op's form at that opset,
    `interop.onnx.exporting.passes.downgrade`, which names a node that has none). Every command that
    writes a graph asks here: an ONNX output is written at it, a graph file records it to be written
    at it later (None: the exporter's default)."""
    if asked is not None or model is None:
        return asked
    from ngrules.interop.onnx.exporting.emitter import OPSETS
    from ngrules.interop.onnx.proto import onnx_opset_version

    return min(model, OPSETS.stop - 1, onnx_opset_version())


def load_with_opset(path: str, options: ReadOptions | None = None):
    """`load`, and the model's standard opset (for a graph file, the one it recorded, if any)."""
    return load_spendable(path, options)[:3]


def reading_ahead(path: str, budget: Budget | None = None) -> AbstractContextManager:
    """While inside, an ONNX model at `path` is read on a thread (beside the command's other
    work: its rules loaded), and `load_spendable(path)` takes those bytes
    (`loading.read_ahead`, within the import's `budget`); nothing for a graph file."""
    if not is_onnx(path):
        return nullcontext()
    from ngrules.budget import DEFAULT_BUDGET
    from ngrules.interop.onnx.importing.loading import DEFAULT_LIMITS, read_ahead

    return read_ahead(path, DEFAULT_LIMITS, (budget or DEFAULT_BUDGET).memory_bytes)


def load_spendable(path: str, options: ReadOptions | None = None):
    """`load_with_opset`, and the model file's bytes that its weights view (None for a graph
    file): a caller that reads none of the graph's nodes again may let the rewrite of it
    write over them (`rewrite(..., spend=...)`)."""
    options = options or ReadOptions()
    if is_onnx(path):
        from ngrules.interop.onnx.importer import import_model
        from ngrules.interop.onnx.importing.loading import DEFAULT_LIMITS, Limits

        limits = DEFAULT_LIMITS
        if options.max_constant_bytes is not None:
            limits = Limits(DEFAULT_LIMITS.model_bytes, options.max_constant_bytes)
        budget = {} if options.budget is None else {"budget": options.budget}
        imported = import_model(path, lengths=options.lengths, axis_names=options.axis_names,
                                limits=limits, symbolic=options.symbolic, **budget)
        return imported.outputs, imported.output_names, imported.opset, imported.spendable
    from ngrules.errors import NgrulesError
    from ngrules.ir.graphfile import load_graph_and_opset

    if options.lengths:
        raise NgrulesError(f"--length {next(iter(options.lengths))}: {path} is a graph file, whose "
                           "axes have their lengths (--length is for ONNX models)")
    _declare_composites(path)
    outputs, opset = load_graph_and_opset(path)
    return outputs, None, opset, None


def _declare_composites(path: str) -> None:
    """The ONNX ops a graph file holds whole (nodes with a `spec`), made ops of this process
    (they are the interop layer's: the graph file reader does not know them)."""
    import json

    from ngrules.ir.ops import OPS

    try:
        nodes = json.loads(Path(path).read_text(encoding="utf-8")).get("nodes", [])
        names = {n["op"] for n in nodes if "spec" in n.get("attrs", {}) and n["op"] not in OPS}
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
        return  # the graph file reader says what is wrong with it
    if names:
        from ngrules.interop.onnx.composites.whole import declare

        for name in sorted(names):
            declare(name)


def options_per_model(paths: Sequence[str], options: ReadOptions) -> dict[str, ReadOptions]:
    """Each model's options with only the lengths of its own symbolic dimensions; a length
    that no model given has is an error (a model that cannot be read has none)."""
    from ngrules.errors import NgrulesError

    dims = {p: _symbolic_dims(p) for p in paths}
    unused = sorted(set(options.lengths) - set().union(*dims.values()))
    if unused:
        raise NgrulesError(f"--length {unused[0]}: no model given has a symbolic dimension "
                           f"of that name")
    return {p: replace(options, lengths={k: v for k, v in options.lengths.items()
                                         if k in dims[p]}) for p in paths}


def _symbolic_dims(path: str) -> set[str]:
    if not is_onnx(path):
        return set()
    from ngrules.errors import NgrulesError
    from ngrules.interop.onnx.importer import symbolic_dims

    try:
        return symbolic_dims(path)
    except (NgrulesError, OSError):
        return set()  # reported when the model is read


def read_options(args) -> ReadOptions:
    """The ONNX reading options of a command's arguments (`common.add_length_option`)."""
    return ReadOptions(parse_lengths(getattr(args, "length", None)),
                       parse_axis_names(getattr(args, "axes", None)),
                       getattr(args, "max_constant_bytes", None),
                       budget=budget_of(args, "import"))


def budget_of(args, job: str):
    """The budget `--JOB-memory` and `--JOB-seconds` give (`common.add_budget_options`), or
    None when neither is given (the default budget)."""
    memory = getattr(args, f"{job}_memory", None)
    seconds = getattr(args, f"{job}_seconds", None)
    if memory is None and seconds is None:
        return None
    from ngrules.budget import DEFAULT_BUDGET, Budget

    return Budget(memory or DEFAULT_BUDGET.memory_bytes, seconds or DEFAULT_BUDGET.seconds)


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


def check_target(path: str, target: str, opset: int | None = None) -> None:
    """A target other than standard ONNX, or an opset, is for an .onnx output only."""
    from ngrules.errors import NgrulesError

    if is_onnx(path):
        return
    if target != "onnx":
        raise NgrulesError(f"{path}: --target {target} is for an ONNX output (a .onnx file)")
    if opset is not None:
        raise NgrulesError(f"{path}: --opset is for an ONNX output (a .onnx file)")


def stage_any(stage, path: str, outputs: Sequence[Node], names: Sequence[str] | None = None,
              target: str = "onnx", opset: int | None = None, budget=None):
    """Stage the graph at `path` (with `stage` from `staged_files`): an ONNX model (checked)
    for `.onnx`, written for `target` at `opset` within `budget` (the export's
    `interop.onnx.budget.Budget`, None: the default), else a graph file recording `opset`."""
    check_target(path, target)
    if is_onnx(path):
        from ngrules.interop.onnx import weights
        from ngrules.interop.onnx.exporter import checker, export_parts
        from ngrules.ir.fileio import check_output

        check_output(path)
        options = {} if opset is None else {"opset": opset}
        options.update({} if budget is None else {"budget": budget})
        model, arrays = export_parts(outputs, output_names=names, target=target, check=False,
                                     **options)  # checked while it is written, before staged
        check = checker(outputs)
        stage(Path(path), lambda f: _said(lambda: weights.write(f, model, arrays, check=check)))
        return
    from ngrules.ir.graphfile import stage_graph

    stage_graph(stage, path, outputs, opset)


def _said(write) -> None:
    """`write()`; a model written though onnxruntime refuses it, as it refuses the model read
    (`refused.RefusedAsRead`), said on stderr as one line."""
    import sys
    import warnings

    from ngrules.interop.onnx.exporting.passes.refused import RefusedAsRead

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RefusedAsRead)
        write()
    for w in caught:
        if issubclass(w.category, RefusedAsRead):
            print("warning: " + " ".join(str(w.message).split()), file=sys.stderr)
        else:  # not ours to say: passed on
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def save(path: str, outputs: Sequence[Node], names: Sequence[str] | None = None,
         target: str = "onnx", opset: int | None = None, budget=None) -> None:
    """Write the graph to `path`: an ONNX model for `.onnx` (for `target`, at `opset`, within
    `budget`), else a graph file."""
    from ngrules.ir.fileio import staged_files

    with staged_files() as stage:
        stage_any(stage, path, outputs, names, target, opset, budget)


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


def parse_axis_names(items: Sequence[str] | None) -> dict[str, list[str | None]]:
    """`INPUT=A,B,C` (an empty name keeps the default) as {input: [names]}."""
    from ngrules.errors import NgrulesError

    out: dict[str, list[str | None]] = {}
    for item in items or ():
        value, _, names = item.partition("=")
        if not value or not names:
            raise NgrulesError(f"--axes expects INPUT=NAME,NAME,..., got {item!r}")
        out[value] = [n or None for n in names.split(",")]
    return out
