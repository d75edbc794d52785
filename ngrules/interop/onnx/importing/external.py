"""Tensors whose data a model keeps in other files ("external data"), read as untrusted input.

A tensor's `location` must name, after links are resolved, a regular file inside the model's
folder (no NUL byte, no absolute path, no `..` out of it, no device, FIFO or /proc file), and
its `offset` and `length` must lie inside that file. Each file is opened once per import and
only the ranges the tensors name are read, each byte once: overlapping ranges are merged and
every tensor views its part. So a file named by many tensors costs its size once, not once per
tensor, and what is read is charged to the import's budget. A large graph initializer becomes an
array viewing those bytes (a graph input stands for it in the model, as for `weights.split`);
other tensors get their bytes copied into the message.
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import numpy as np

from ngrules.errors import FileError, printable
from ngrules.interop.onnx import OnnxError, proto
from ngrules.interop.onnx.budget import Meter
from ngrules.interop.onnx.weights import _DTYPES, STEERING_SIZE
from ngrules.ir.fileio import open_regular


def _tensors(model) -> list:
    """The tensors kept in external files, in the order onnx's `external_data_helper` walks
    them: initializers (subgraphs' too), then attribute tensors (subgraphs' and functions')."""
    functions = (t for f in model.functions for t in _attribute_tensors(f))
    walked = itertools.chain(_initializers(model.graph), _attribute_tensors(model.graph),
                             functions)
    external = proto.TensorProto.EXTERNAL
    return [t for t in walked if t.HasField("data_location") and t.data_location == external]


def _subgraphs(attribute) -> list:
    if attribute.type == proto.AttributeProto.GRAPH:
        return [attribute.g]
    return list(attribute.graphs) if attribute.type == proto.AttributeProto.GRAPHS else []


def _initializers(graph):
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            for g in _subgraphs(a):
                yield from _initializers(g)


def _attribute_tensors(graph):
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            for g in _subgraphs(a):
                yield from _attribute_tensors(g)


class _Request:
    """One tensor's place: the file, its range, and what to call it in errors."""

    def __init__(self, tensor, folder: Path, where: str):
        info = {e.key: e.value for e in tensor.external_data}
        self.tensor = tensor
        self.label = f"{where}: tensor {printable(repr(tensor.name))}"
        location = info.get("location", "")
        self.shown = printable(repr(location))
        if "\0" in location:
            raise OnnxError(f"{self.label}: external data {self.shown} holds a NUL byte")
        inside = folder.resolve()
        self.target = (folder / location).resolve()
        if not location or os.path.isabs(location) or not self.target.is_relative_to(inside):
            raise OnnxError(f"{self.label}: external data {self.shown} is outside the "
                            "model's folder")
        try:
            self.offset, self.length = int(info.get("offset", 0)), int(info.get("length", -1))
        except ValueError:
            raise OnnxError(f"{self.label}: bad external data offset or length") from None
        if self.offset < 0 or self.length < -1:
            raise OnnxError(f"{self.label}: a negative external data offset or length")

    def fit(self, size: int) -> None:
        """The range inside a file of `size` bytes (a length of -1: to the file's end)."""
        if self.length == -1:
            self.length = max(size - self.offset, 0)
        if self.offset + self.length > size:
            raise OnnxError(f"{self.label}: external data {self.shown}: bytes {self.offset} to "
                            f"{self.offset + self.length} of a file of {size} bytes")


def load(model, folder: Path, where: str, limit: int, meter: Meter) -> dict[str, np.ndarray]:
    """Fill the model's external tensors (in place); the large initializers among them are
    taken out and returned as arrays by name."""
    requests = [_Request(t, folder, where) for t in _tensors(model)]
    by_file: dict[Path, list[_Request]] = {}
    for r in requests:
        by_file.setdefault(r.target, []).append(r)
    views: dict[int, tuple[bytes, int]] = {}
    for target, group in by_file.items():
        views.update(_read_file(target, group, limit, meter))
    return _fill(model, requests, views, meter)


def _read_file(target: Path, group: list[_Request], limit: int, meter: Meter):
    """{id(request): (bytes, where its range starts in them)} for the requests of one file,
    the file opened and each byte of the union of their ranges read once. (Bytes, not
    memoryviews: an array viewing bytes is known immutable, so constants never copy it.)"""
    first = group[0]
    try:
        with open_regular(target, limit) as f:
            size = os.fstat(f.fileno()).st_size
            for r in group:
                r.fit(size)
            out = {}
            for start, end, members in _merged(group):
                meter.check_time(first.label)
                meter.charge(end - start, f"{first.label}: external data {first.shown}")
                f.seek(start)
                data = f.read(end - start)
                if len(data) != end - start:
                    raise OnnxError(f"{first.label}: external data {first.shown} is shorter "
                                    "than its size said (it changed while it was read)")
                for r in members:
                    out[id(r)] = (data, r.offset - start)
            return out
    except FileError as e:
        raise OnnxError(f"{first.label}: external data {first.shown}: {e.message}") from None
    except OSError as e:
        raise OnnxError(f"{first.label}: external data {first.shown}: "
                        f"{printable(e.strerror or e)}") from None


def _merged(group: list[_Request]):
    """(start, end, requests) of each maximal run of overlapping or touching ranges."""
    runs: list[list] = []
    for r in sorted(group, key=lambda r: r.offset):
        end = r.offset + r.length
        if runs and r.offset <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], end)
            runs[-1][2].append(r)
        else:
            runs.append([r.offset, end, [r]])
    return runs


def _fill(model, requests: list[_Request], views: dict[int, tuple[bytes, int]], meter: Meter):
    graph = model.graph
    initializers = {id(t) for t in graph.initializer}
    arrays: dict[str, np.ndarray] = {}
    for r in requests:
        t, (data, start) = r.tensor, views[id(r)]
        if id(t) in initializers and _viewable(t):
            arrays[t.name] = _array(t, data, start, r.length, r.label)
            continue
        meter.charge(r.length, f"{r.label}: external data {r.shown}")  # copied into t
        t.raw_data = data[start:start + r.length]
        t.data_location = proto.TensorProto.DEFAULT
        del t.external_data[:]
    names = [t.name for t in graph.initializer]
    twice = next((n for n in arrays if names.count(n) > 1), None)
    if twice is not None:  # the checker's words for it, which no longer sees both
        raise OnnxError(f"invalid ONNX model: {printable(twice)} initializer name is not unique")
    if arrays:
        kept = [t for t in graph.initializer if t.name not in arrays]
        del graph.initializer[:]
        graph.initializer.extend(kept)
        inputs = {i.name for i in graph.input}
        for name, array in arrays.items():
            if name not in inputs:
                elem = next(e for e, d in _DTYPES.items() if np.dtype(d) == array.dtype)
                graph.input.append(proto.make_tensor_value_info(name, elem, array.shape))
    return arrays


def _viewable(t) -> bool:
    return (t.data_type in _DTYPES and all(d >= 0 for d in t.dims)
            and math.prod(t.dims) > STEERING_SIZE)


def _array(t, data: bytes, start: int, length: int, label: str) -> np.ndarray:
    dtype = np.dtype(_DTYPES[t.data_type])
    count = math.prod(t.dims)
    if length != count * dtype.itemsize:
        raise OnnxError(f"{label}: its data does not match its dims {list(t.dims)} and type "
                        f"({length} bytes of external data)")
    array = np.frombuffer(data, dtype, count, start).reshape(tuple(t.dims))
    return array if dtype.isnative else array.astype(dtype.newbyteorder("="))
