"""Graph files: a versioned JSON listing of nodes, with Constant values in a sibling `.npz`.

The format is described in docs/graph-format.md. Loading trusts nothing in the files: every
field is checked, nodes are rebuilt through `make_node` (so axes and dtypes are re-inferred),
arrays are read without pickle (`arraysfile`), and each problem is reported as a
`GraphFileError` naming the file and the node. Saving is atomic and safe against concurrent
writers (`fileio.staged_files`): both files are written to temporary files in the target folder
and moved into place together, under a lock on the folder, only when both are complete.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from ngrules.errors import FileError, GraphFileError, NgrulesError, Span
from ngrules.ir import declared
from ngrules.ir.arraysfile import DTYPE_NAMES, ArraysFile, sha256_of
from ngrules.ir.axes import Axes, Axis, FlattenedAxis
from ngrules.ir.fileio import check_output, folder_lock, open_regular, read_regular, staged_files
from ngrules.ir.graph import Node, make_node, toposort
from ngrules.ir.ops import OPS, OpDef, did_you_mean, get_op

FORMAT = "ngrules-graph"
VERSION = 1

_HEADER_KEYS = ("format", "version", "arrays", "outputs", "nodes")
_OPTIONAL_KEYS = ("ops", "onnx_opset")  # declared ops the nodes use; the opset to write at
_NODE_KEYS = ("id", "op", "args", "attrs", "origin")
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_MAX_INT_DIGITS = 40

#: Size limits of the files `load_graph` reads (a JSON document is parsed in memory).
MAX_GRAPH_BYTES = 1 << 30
MAX_ARRAYS_FILE_BYTES = 1 << 36

__all__ = ["RuleOrigin", "arrays_path", "load_graph", "load_graph_and_opset", "save_graph",
           "stage_graph", "staged_files"]


@dataclass(frozen=True)
class RuleOrigin:
    """The rule that made a loaded node, as the file recorded it (the rule may not be loaded)."""

    name: str
    location: str


def arrays_path(path: str | os.PathLike) -> Path:
    """The `.npz` beside a graph file: `g.json` -> `g.npz`, any other name gains `.npz`."""
    path = Path(path)
    if path.suffix == ".json":
        return path.with_suffix(".npz")
    return path.with_name(path.name + ".npz")


# -- saving --------------------------------------------------------------------------------------
def _unicode(text: str) -> str:
    """Text a reader will accept: no lone surrogates, which UTF-8 cannot encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise GraphFileError(f"cannot save {text!r}: a lone surrogate at {e.start}") from None
    return text


def _encode_axis(axis: Axis) -> dict:
    out: dict[str, Any] = {"name": _unicode(axis.name), "length": axis.length}
    if axis.is_flattened:
        out["components"] = [_encode_axis(c) for c in axis.components]
    return out


def _encode_attr(kind: str, value: Any, key: str, arrays: dict[str, np.ndarray]) -> Any:
    """One attribute as JSON; arrays go to `arrays` under `key` and are referenced by it."""
    if kind == "axes":
        return [_encode_axis(a) for a in value]
    if kind == "axis":
        return _encode_axis(value)
    if kind == "dtype":
        return value.name
    if kind == "array":
        arrays[key] = value
        return {"array": key, "dtype": value.dtype.name, "shape": list(value.shape)}
    if kind == "str":
        return _unicode(value)
    if kind == "float" and not math.isfinite(value):
        return repr(value)  # 'nan', 'inf' or '-inf': JSON has no such numbers
    return value


def _encode_origin(origin: Any) -> dict:
    name = getattr(origin, "name", None)
    location = getattr(origin, "location", None)
    return {"rule": _unicode(name if isinstance(name, str) else str(origin)),
            "location": _unicode(location if isinstance(location, str) else "<unknown>")}


def _encode_nodes(outputs: Sequence[Node]) -> tuple[list[dict], list[int], dict[str, np.ndarray]]:
    """The node records in topological order, the output ids, and the arrays by key."""
    ids: dict[Node, int] = {}
    records, arrays = [], {}
    for node in toposort(outputs):
        ident = ids[node] = len(ids)
        opdef = get_op(node.op)
        attrs = {k: _encode_attr(opdef.attr(k).kind, v, f"n{ident}_{k}", arrays)
                 for k, v in node.attrs.items()}
        record = {"id": ident, "op": node.op, "args": [ids[a] for a in node.args], "attrs": attrs}
        if node.origin is not None:
            record["origin"] = _encode_origin(node.origin)
        records.append(record)
    return records, [ids[o] for o in outputs], arrays


def _write_json(f: IO[str], header: dict, records: list[dict]) -> None:
    """The document with one node per line, so files read well and diff well."""
    f.write("{\n")
    for key, value in header.items():
        f.write(f"  {json.dumps(key)}: ")
        json.dump(value, f, allow_nan=False)
        f.write(",\n")
    f.write('  "nodes": [')
    for i, record in enumerate(records):
        f.write(",\n    " if i else "\n    ")
        json.dump(record, f, allow_nan=False)
    f.write("\n  ]\n}\n")


def _sha256(name: str) -> str:
    with open(name, "rb") as f:
        return sha256_of(f)


def stage_graph(stage: Callable[..., str], path: str | os.PathLike, outputs: Sequence[Node],
                onnx_opset: int | None = None):
    """Stage the graph's two files with `stage` from `staged_files` (to write them with others);
    `onnx_opset`: the opset of the model it was read from, to write it back at."""
    check_output(path)
    path = Path(path)
    records, output_ids, arrays = _encode_nodes(list(outputs))
    npz = stage(arrays_path(path), lambda f: np.savez(f, allow_pickle=False, **arrays))
    header = {
        "format": FORMAT,
        "version": VERSION,
        "arrays": {"sha256": _sha256(npz)},
        "outputs": output_ids,
    }
    ops = declared.declarations(dict.fromkeys(r["op"] for r in records))
    if ops:
        header["ops"] = ops
    if onnx_opset is not None:
        header["onnx_opset"] = int(onnx_opset)
    stage(path, lambda f: _write_json(f, header, records), text=True)


def save_graph(path: str | os.PathLike, outputs: Sequence[Node]) -> None:
    """Write the graph under `outputs` to `path` (JSON) and its arrays to `arrays_path(path)`."""
    with staged_files() as stage:
        stage_graph(stage, path, outputs)


# -- loading -------------------------------------------------------------------------------------
class _Bad(NgrulesError):
    """A problem inside one node; the loader adds the file and node to the message."""


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _expect(ok: bool, what: str, value: Any) -> None:
    if not ok:
        raise _Bad(f"expected {what}, got {_show(value)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_keys(obj: Any, allowed: Sequence[str], what: str) -> None:
    _expect(isinstance(obj, dict), f"{what} as a JSON object", obj)
    for key in obj:
        if key not in allowed:
            raise _Bad(f"unknown key {key!r} in {what}{did_you_mean(key, allowed)}")


def _decode_axis(raw: Any, lengths: dict[str, int]) -> Axis:
    """An axis from {name, length[, components]}; `lengths` catches a name with two lengths."""
    _check_keys(raw, ("name", "length", "components"), "an axis")
    name, length = raw.get("name"), raw.get("length")
    _expect(_decode_text(name, "an axis name") != "", "an axis name (a non-empty string)", name)
    _expect(_is_int(length) and length >= 1, f"a positive integer length for axis {name!r}", length)
    if "components" in raw:
        comps = raw["components"]
        _expect(isinstance(comps, list) and comps != [], "a non-empty list of components", comps)
        axis = FlattenedAxis([_decode_axis(c, lengths) for c in comps])
        if (axis.name, axis.length) != (name, length):
            raise _Bad(f"flattened axis {name}:{length} does not match its components {axis!r}")
    else:
        axis = Axis(name, length)
    known = lengths.setdefault(name, length)
    if known != length:
        raise _Bad(f"axis {name!r} has two lengths, {known} and {length}")
    return axis


class _Arrays:
    """The `.npz` beside a graph file, checked against its digest, its arrays read on demand."""

    def __init__(self, path: Path, opened: IO[bytes] | Exception, digest: str):
        npz = arrays_path(path)
        try:
            if isinstance(opened, Exception):
                raise opened
            same = sha256_of(opened) == digest
        except (OSError, FileError) as e:
            reason = e.message if isinstance(e, FileError) else e.strerror
            raise GraphFileError(f"{path}: cannot read its arrays file {npz}: {reason}") from None
        if not same:
            raise GraphFileError(
                f"{path}: its arrays file {npz} was not saved with it (the sha256 differs)"
            )
        try:
            self.npz = ArraysFile(opened, npz)
        except FileError as e:
            raise GraphFileError(f"{npz}: {e.message}") from None

    def get(self, ref: Any) -> np.ndarray:
        _check_keys(ref, ("array", "dtype", "shape"), "an array reference")
        key, shape = ref.get("array"), ref.get("shape")
        _expect(isinstance(key, str) and key in self.npz.members, "an array in the .npz", key)
        dtype = _decode_dtype(ref.get("dtype"))
        ok = isinstance(shape, list) and all(_is_int(n) and n >= 0 for n in shape)
        _expect(ok, "a shape (a list of lengths)", shape)
        return self.npz.read(key, dtype, shape)


def _decode_dtype(raw: Any) -> np.dtype:
    _expect(isinstance(raw, str) and raw in DTYPE_NAMES, "a dtype", raw)
    return np.dtype(raw)


def _decode_text(raw: Any, what: str) -> str:
    """A string that is valid Unicode (JSON escapes can make lone surrogates, which are not)."""
    _expect(isinstance(raw, str), what, raw)
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _Bad(f"expected {what}, got a string with a lone surrogate at {e.start}") from None
    return raw


def _decode_float(raw: Any) -> float:
    if isinstance(raw, str) and raw in _NONFINITE:
        return _NONFINITE[raw]
    _expect(isinstance(raw, (int, float)) and not isinstance(raw, bool), "a number", raw)
    return float(raw)


def _decode_attr(kind: str, raw: Any, lengths: dict[str, int], arrays: _Arrays) -> Any:
    if kind == "axes":
        _expect(isinstance(raw, list), "a list of axes", raw)
        return Axes(_decode_axis(a, lengths) for a in raw)
    if kind == "axis":
        return _decode_axis(raw, lengths)
    if kind == "int":
        _expect(_is_int(raw), "an integer", raw)
        return raw
    if kind == "float":
        return _decode_float(raw)
    if kind == "str":
        return _decode_text(raw, "a string")
    if kind == "dtype":
        return _decode_dtype(raw)
    if not isinstance(raw, dict):  # a number where files before arrays held one (`initial`)
        return np.asarray(_decode_float(raw))
    return arrays.get(raw)


def _decode_attrs(opdef: OpDef, raw: Any, arrays: _Arrays) -> dict[str, Any]:
    _expect(isinstance(raw, dict), "the attributes as a JSON object", raw)
    lengths: dict[str, int] = {}
    attrs = {}
    for key, value in raw.items():
        spec = opdef.attr(key)
        if spec is None:
            names = [a.name for a in opdef.attrs]
            raise _Bad(f"unknown attribute {key!r}{did_you_mean(key, names)}")
        try:
            attrs[key] = _decode_attr(spec.kind, value, lengths, arrays)
        except NgrulesError as e:
            raise _Bad(f"attribute {key!r}: {e.message}") from None
    return attrs


def _decode_args(raw: Any, built: dict[int, Node]) -> tuple[Node, ...]:
    _expect(isinstance(raw, list), "the arguments as a list of node ids", raw)
    for ref in raw:
        _expect(_is_int(ref), "a node id as an argument", ref)
        if ref not in built:
            raise _Bad(f"argument {ref} is not a node defined before this one")
    return tuple(built[ref] for ref in raw)


def _decode_origin(raw: Any) -> RuleOrigin:
    _check_keys(raw, ("rule", "location"), "the origin")
    name, location = raw.get("rule"), raw.get("location")
    _expect(isinstance(name, str) and isinstance(location, str), "an origin {rule, location}", raw)
    return RuleOrigin(_decode_text(name, "a rule name"), _decode_text(location, "a location"))


def _decode_node(raw: dict, built: dict[int, Node], arrays: _Arrays) -> Node:
    """One node record, rebuilt through make_node (which re-infers its axes and dtype)."""
    _check_keys(raw, _NODE_KEYS, "a node")
    ident, op = raw.get("id"), raw.get("op")
    _expect(_is_int(ident), "an integer id", ident)
    if ident in built:
        raise _Bad(f"id {ident} is used twice")
    _expect(isinstance(op, str), "an op name", op)
    opdef = get_op(op)
    args = _decode_args(raw.get("args", []), built)
    node = make_node(op, args, **_decode_attrs(opdef, raw.get("attrs", {}), arrays))
    if "origin" in raw:
        origin = _decode_origin(raw["origin"])
        if node.origin is None:  # a node shared with a live graph keeps the origin it has
            node.origin = origin
    return node


def _where(raw: Any, index: int) -> str:
    """How an error names a node record: `node 12 (Sum)`, or by position if it has no id."""
    if not isinstance(raw, dict):
        return f"nodes[{index}]"
    ident, op = raw.get("id"), raw.get("op")
    where = f"node {ident}" if _is_int(ident) else f"nodes[{index}]"
    return f"{where} ({op})" if isinstance(op, str) and op in OPS else where


def _read_pair(path: Path) -> tuple[bytes, IO[bytes] | Exception]:
    """The graph file's bytes and its arrays file opened, both under the folder's shared lock,
    so that a concurrent save cannot give us one save's JSON with another's arrays."""
    with folder_lock(path.parent, exclusive=False):
        try:
            data = read_regular(path, MAX_GRAPH_BYTES)
        except OSError as e:
            raise GraphFileError(f"{path}: cannot read: {e.strerror}") from None
        except FileError as e:
            raise GraphFileError(f"{path}: cannot read: {e.message}") from None
        try:
            return data, open_regular(arrays_path(path), MAX_ARRAYS_FILE_BYTES)
        except (OSError, FileError) as e:
            return data, e


def _parse_int(text: str) -> int:
    if len(text) > _MAX_INT_DIGITS:
        raise _Bad(f"an integer of {len(text)} digits is too large")
    return int(text)


def _parse_constant(text: str) -> float:
    raise _Bad(f"{text} is not JSON (a float attribute may be the string {text.lower()!r})")


def _read_document(path: Path, data: bytes) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GraphFileError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        return json.loads(text, parse_int=_parse_int, parse_constant=_parse_constant)
    except json.JSONDecodeError as e:
        raise GraphFileError(e.msg, Span(str(path), e.lineno, e.colno)) from None
    except _Bad as e:
        raise GraphFileError(f"{path}: {e.message}") from None
    except RecursionError:
        raise GraphFileError(f"{path}: JSON nested too deeply") from None


def _check_header(path: Path, doc: Any) -> None:
    """The format marker and version first, so a newer file says so rather than failing later."""
    try:
        _expect(isinstance(doc, dict), "a JSON object", doc)
        _expect(doc.get("format") == FORMAT, f"format {FORMAT!r}", doc.get("format"))
        version = doc.get("version")
        if not _is_int(version) or version != VERSION:
            raise _Bad(f"format version {_show(version)} is not supported (this reads {VERSION})")
        _check_keys(doc, _HEADER_KEYS + _OPTIONAL_KEYS, "the graph file")
        for key in _HEADER_KEYS:
            if key not in doc:
                raise _Bad(f"missing key {key!r}")
        _check_keys(doc["arrays"], ("sha256",), "'arrays'")
        _expect(isinstance(doc["arrays"].get("sha256"), str), "a sha256 digest", doc["arrays"])
        _expect(isinstance(doc["nodes"], list), "'nodes' as a list", doc["nodes"])
        _expect(isinstance(doc["outputs"], list), "'outputs' as a list", doc["outputs"])
        _expect(_is_int(doc.get("onnx_opset", 1)), "an integer opset", doc.get("onnx_opset"))
    except _Bad as e:
        raise GraphFileError(f"{path}: {e.message}") from None


def _outputs(path: Path, refs: list, built: dict[int, Node]) -> list[Node]:
    for ref in refs:
        if not _is_int(ref) or ref not in built:
            raise GraphFileError(f"{path}: outputs: {_show(ref)} is not the id of a node")
    return [built[ref] for ref in refs]


def load_graph(path: str | os.PathLike) -> list[Node]:
    """The outputs of the graph saved at `path`, rebuilt and checked node by node."""
    return load_graph_and_opset(path)[0]


def load_graph_and_opset(path: str | os.PathLike) -> tuple[list[Node], int | None]:
    """`load_graph`, and the opset of the ONNX model the graph was read from (None if none)."""
    path = Path(path)
    data, opened = _read_pair(path)
    try:
        doc = _read_document(path, data)
        del data
        _check_header(path, doc)
        arrays = _Arrays(path, opened, doc["arrays"]["sha256"])
        declared.declare(doc.get("ops", []), f"{path} (its declared ops)")
        return _build(path, doc, arrays), doc.get("onnx_opset")
    except MemoryError:
        raise GraphFileError(f"{path}: not enough memory to load it") from None
    finally:
        if not isinstance(opened, Exception):
            opened.close()


def _build(path: Path, doc: dict, arrays: _Arrays) -> list[Node]:
    built: dict[int, Node] = {}
    for index, raw in enumerate(doc["nodes"]):
        try:
            node = _decode_node(raw, built, arrays)
        except NgrulesError as e:
            raise GraphFileError(f"{path}: {_where(raw, index)}: {e.message}") from None
        except RecursionError:
            raise GraphFileError(f"{path}: {_where(raw, index)}: nested too deeply") from None
        built[raw["id"]] = node
    return _outputs(path, doc["outputs"], built)
