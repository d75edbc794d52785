"""Reading an ONNX model as untrusted input: the file, its tensors, its structure.

A model path must name a regular file (a FIFO, a device or a folder is refused before anything
is read) of at most `Limits.model_bytes`, and a file of 0 bytes is not a model. Tensors kept in
external files are read only from regular files inside the model's folder. Every model then
passes onnx's checker (single assignment, unique initializer names, topological order, tensor
data against dims), so a malformed model is one line naming what is wrong, never a traceback
from deeper in the importer. `tensor_array` reads one tensor, checking its data against its dims.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ngrules.errors import FileError, printable
from ngrules.interop.onnx import OnnxError, ndarrays, proto, require_onnx, weights
from ngrules.interop.onnx.budget import DEFAULT_BUDGET, Meter
from ngrules.interop.onnx.importing import external
from ngrules.ir.filebytes import CAN_MAP, MAP_BYTES, map_file, read_into
from ngrules.ir.fileio import open_regular


@dataclass(frozen=True)
class Limits:
    """What an import may cost: the model file's size, and the size of any constant the
    importer computes (a folded shape computation, a ConstantOfShape, a Range, a Tile...)."""

    model_bytes: int = 1 << 31  # protobuf's own limit for one message
    constant_bytes: int = 1 << 28  # 256 MiB


DEFAULT_LIMITS = Limits()


def one_line(text: object) -> str:
    return " ".join(line.strip() for line in str(text).splitlines() if line.strip())


def read_model(path: str | os.PathLike, limits: Limits = DEFAULT_LIMITS,
               meter: Meter | None = None, meanwhile: Callable[[], object] | None = None):
    """The ModelProto in a file, its external tensors loaded, but its large weights left out
    (`weights.split`: graph inputs in their place), and those weights as arrays viewing the
    file's bytes (or the external files'). The file's bytes, and what is read of external
    files, are charged to the import's `meter` before they are read. The file is read on a
    thread of its own while onnx's protobuf module and C++ extension load (`proto.load`,
    `weights.Background`), onnx builds its op schemas (which its checker needs next) and
    `meanwhile()` runs (the importer's converters loaded): the read waits on the kernel, the
    rest on the interpreter. Inside `read_ahead(path)`, that read is the one it began (if the
    file is the one it read)."""
    meter = meter or Meter()
    where = os.fspath(path)
    try:
        f = open_regular(path, limits.model_bytes)
    except Exception as e:
        require_onnx()  # without onnx, how to install it is the first thing to say
        if isinstance(e, FileError):
            raise OnnxError(f"{where}: {e.message}") from None
        raise
    with f:
        size = os.fstat(f.fileno()).st_size
        try:
            meter.charge(size, f"{printable(where)}: the model file")
        except Exception:
            require_onnx()
            raise
        reading = _ahead_of(where, f) or weights.Background(lambda: _bytes_of(f, size, where))
        try:
            require_onnx()
            proto.build_schemas()
            if meanwhile is not None:
                meanwhile()
        except BaseException:  # a Ctrl-C, onnx missing...: said, not what the read met
            reading.wait()  # the file is closed only once the read has stopped
            raise
        data = reading.result()
    if data is None or len(data) > size:
        raise OnnxError(f"{where}: it changed (from {size} bytes) while it was read")
    if not data:
        raise OnnxError(f"{where}: an empty file (0 bytes) is not an ONNX model")
    try:
        model, arrays = weights.split(data, where, meter)
    except OnnxError:
        raise
    except Exception as e:  # protobuf's DecodeError and friends
        reason = one_line(e) or type(e).__name__
        raise OnnxError(f"{where}: not a readable ONNX model ({reason})") from None
    arrays.update(external.load(model, Path(where).parent, where, limits.model_bytes, meter))
    return model, arrays


def _bytes_of(f, size: int, where: str):
    """The file's bytes: mapped if large, else read (`ir.filebytes`); None if it changed."""
    if _mapped(size):
        return map_file(f, size, printable(where))
    return read_into(f, size)


def _mapped(size: int) -> bool:
    return size >= max(MAP_BYTES, 1) and CAN_MAP  # (an empty file cannot be mapped)


# -- reading ahead --------------------------------------------------------------------------------
#: The model files being read ahead (`read_ahead`): path as given -> `_Ahead`.
_AHEAD: dict[str, _Ahead] = {}


class _Ahead:
    """A model file's bytes being read on a thread (which then closes it), and what the file
    was when opened: a `read_model` of a file that is no longer that one reads it again.
    One no one takes is not waited for (an error in the rules is said at once): its thread
    ends, then its bytes are freed, with the last reference to it."""

    def __init__(self, f, identity: tuple):
        self.identity = identity
        self.reading = weights.Background(lambda: _read_closing(f, identity[2]))


def _read_closing(f, size: int):
    with f:
        return read_into(f, size)


def _identity(f) -> tuple:
    info = os.fstat(f.fileno())
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


@contextlib.contextmanager
def read_ahead(path: str | os.PathLike, limits: Limits = DEFAULT_LIMITS,
               memory_bytes: int = DEFAULT_BUDGET.memory_bytes) -> Iterator[None]:
    """While inside, the model file at `path` is read on a thread, and `read_model(path)`
    takes those bytes rather than reading it again (when the file it opens is the same file,
    unchanged): a caller starts it before other work (the rules loaded), which the read then
    runs beside. Read ahead only is a file `read_model` would read whole (not one it maps:
    mapping takes no time) and may (of at most `memory_bytes`, what its import's budget
    allows, and `limits.model_bytes`); anything wrong with the file is left for `read_model`
    to say. Bytes not taken are dropped on leaving."""
    where = os.fspath(path)
    ahead = _start(path, limits, memory_bytes)
    if ahead is not None:
        _AHEAD[where] = ahead
    try:
        yield
    finally:
        if ahead is not None and _AHEAD.get(where) is ahead:
            del _AHEAD[where]


def _start(path, limits: Limits, memory_bytes: int) -> _Ahead | None:
    """The read ahead of the file, begun; None for a file not to read ahead, or whatever
    goes wrong (`read_model`, doing the same, then says what)."""
    try:
        f = open_regular(path, limits.model_bytes)
    except Exception:  # noqa: BLE001
        return None
    try:
        identity = _identity(f)
        size = identity[2]
        if 0 < size <= memory_bytes and not _mapped(size):
            return _Ahead(f, identity)  # the thread closes the file
    except Exception:  # noqa: BLE001
        pass
    f.close()
    return None


def _ahead_of(where: str, f):
    """The read of the file `where` begun by `read_ahead` (a `weights.Background`), if it
    reads the same file as `f`, unchanged since; else None (a read ahead of another file, or
    of a changed one, is dropped)."""
    ahead = _AHEAD.pop(where, None)
    if ahead is None or ahead.identity != _identity(f):
        return None
    return ahead.reading


def check_model(model, where: str) -> None:
    """onnx's checker (`onnx.checker.check_model`, run by `proto`), as one located line."""
    require_onnx()
    if not model.graph.node and not model.graph.output:
        raise OnnxError(f"{where}: the model has no graph (no nodes and no outputs)")
    _check_what_onnx_trusts(model, where)
    try:
        proto.check_model(model)
    except Exception as e:  # ValidationError, or a C++ error surfaced as another type
        raise OnnxError(f"{where}: invalid ONNX model: {one_line(e)}") from None


#: Attribute values onnx's shape inference (C++) reads without a bound check, crashing the
#: whole process: (op_type, attribute) -> the least value the ONNX spec allows.
_LEAST_VALUES = {("GatherND", "batch_dims"): 0}


def _check_what_onnx_trusts(model, where: str) -> None:
    """What onnx's own checks do not bound, before they run. A `num_outputs` attribute must
    count the node's outputs (onnx allocates that many outputs first: 2**31 of them take
    minutes and gigabytes); an attribute in `_LEAST_VALUES` must not be below its least
    value (a GatherND with batch_dims -5 is a segmentation fault in shape inference). Every
    name and string attribute must be text: protobuf hands a string field that is not UTF-8
    back as bytes, and onnx's shape inference loops forever on some (`_check_text`)."""
    _check_names(_graph_names(model.graph), f"{where}: the graph")
    for node in _nodes(model):
        name = printable(repr(node.name or node.output[:1]))
        label = f"{where}: {printable(node.op_type)} node {name}"
        _check_names([node.name, node.op_type, node.domain, *node.input, *node.output], label)
        for a in node.attribute:
            _check_text(a, label)
            if a.name == "num_outputs" and a.i != len(node.output):
                raise OnnxError(f"{label}: num_outputs is {a.i} for {len(node.output)} outputs")
            least = _LEAST_VALUES.get((node.op_type, a.name))
            if least is not None and a.i < least:
                raise OnnxError(f"{label}: {a.name} is {a.i}, less than {least}")


def _graph_names(graph) -> list:
    """The names the graph gives its values and their symbolic dimensions."""
    values = [*graph.input, *graph.output, *graph.value_info]
    dims = [d.dim_param for v in values for d in v.type.tensor_type.shape.dim]
    return [*(v.name for v in values), *(t.name for t in graph.initializer), *dims]


def _check_text(attribute, label: str) -> None:
    """A string attribute must be UTF-8 text: onnx's shape inference loops without end (and
    without a signal stopping it) on an Einsum equation holding byte 0xff."""
    texts = [attribute.s] if attribute.type == 3 else list(attribute.strings)  # STRING(S)
    for text in texts:
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:
            raise OnnxError(f"{label}: attribute {printable(attribute.name)} is not UTF-8 "
                            "text") from None


def _check_names(names, label: str) -> None:
    bad = next((n for n in names if not isinstance(n, str)), None)
    if bad is not None:
        raise OnnxError(f"{label}: a name is not UTF-8 text ({bytes(bad)[:40]!r})")


def _nodes(model):
    """Every node of the model: its graph's, its subgraphs' (If, Loop, Scan) and functions'."""
    graph, graphs = proto.AttributeProto.GRAPH, proto.AttributeProto.GRAPHS
    pending = [list(model.graph.node)] + [list(f.node) for f in model.functions]
    while pending:
        for node in pending.pop():
            yield node
            for a in node.attribute:
                if a.type == graph:
                    pending.append(list(a.g.node))
                elif a.type == graphs:
                    pending.extend(list(g.node) for g in a.graphs)


def tensor_array(tensor, where: str) -> np.ndarray:
    """A TensorProto's value, after checking that its data fills its dims exactly."""
    dims = tuple(tensor.dims)
    if any(d < 0 for d in dims):
        raise OnnxError(f"{where}: tensor {tensor.name!r} has a negative dimension {dims}")
    try:
        value = ndarrays.to_array(tensor)
    except Exception as e:  # a data field shorter or longer than the dims say, a bad type
        raise OnnxError(f"{where}: tensor {tensor.name!r}: its data does not match its dims "
                        f"{list(dims)} and type ({one_line(e)})") from None
    if value.shape != dims:
        raise OnnxError(f"{where}: tensor {tensor.name!r}: data of shape {value.shape} for "
                        f"dims {list(dims)}")
    return value
