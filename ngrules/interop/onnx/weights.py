"""A model's large initializers as arrays that view its bytes, and the model without them.

Parsing a model with protobuf copies every weight into the message, and `numpy_helper`
copies it again into an array. Instead the serialised model is walked at the wire level: each
initializer of more than `STEERING_SIZE` elements kept as little-endian `raw_data` becomes a
read-only `np.frombuffer` view of the file's bytes (no copy), and is left out of the message
that is parsed; in its place the graph gets an input of its type and shape, so the checker and
shape inference see the same graph while never touching the weights. Small initializers (the
values that steer shapes), external, typed-field or exotic-typed tensors stay in the message.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from ngrules.interop.onnx import OnnxError, proto
from ngrules.ir.filebytes import FileBytes, changed, file_span, root
from ngrules.ir.writeback import Writeback

#: Initializers of at most this many elements stay in the parsed model (folding's bound on
#: values that steer shapes).
STEERING_SIZE = 1 << 12

#: ONNX element types stored as plain little-endian numbers, viewed as these numpy dtypes.
_DTYPES = {1: "<f4", 2: "u1", 3: "i1", 4: "<u2", 5: "<i2", 6: "<i4", 7: "<i8", 9: "?",
           10: "<f2", 11: "<f8", 12: "<u4", 13: "<u8"}

_MODEL_GRAPH, _GRAPH_INIT, _GRAPH_INPUT = 7, 5, 11

#: The most fields the walk reads in one message (a graph of millions of nodes is parsed by
#: protobuf alone, its weights then copied, and charged as such).
MAX_FIELDS = 1 << 22
_DIMS, _TYPE, _NAME, _RAW, _EXTERNAL, _LOCATION = 1, 2, 8, 9, 13, 14


def _varint(data, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data, start: int, end: int):
    """(field number, wire type, value or (start, end) of its bytes, field start) of a message.
    ValueError for what protobuf rejects at once (field number 0: a run of zero bytes) and
    for more than `MAX_FIELDS` fields (protobuf's parser, not this loop, goes through those)."""
    pos, count = start, 0
    while pos < end:
        begin = pos
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        count += 1
        if number == 0 or count > MAX_FIELDS:
            raise ValueError("field number 0" if number == 0 else "too many fields")
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = (pos, pos + size), pos + size
        elif wire in (1, 5):
            value, pos = None, pos + (8 if wire == 1 else 4)
        else:
            raise ValueError(f"wire type {wire}")
        if pos > end:
            raise ValueError("a field runs past its message")
        yield number, wire, value, begin, pos


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload


class _Tensor:
    """What the walk reads of one initializer."""

    def __init__(self, data, span):
        self.dims: list[int] = []
        self.elem, self.name, self.raw, self.external = 0, "", None, False
        for number, wire, value, _, _ in _fields(data, *span):
            if number == _DIMS and wire == 0:
                self.dims.append(value - (1 << 64) if value >= 1 << 63 else value)
            elif number == _DIMS and wire == 2:
                pos, end = value
                while pos < end:
                    dim, pos = _varint(data, pos)
                    self.dims.append(dim - (1 << 64) if dim >= 1 << 63 else dim)
            elif number == _TYPE:
                self.elem = value
            elif number == _NAME:
                self.name = bytes(data[value[0]:value[1]]).decode("utf-8", "replace")
            elif number == _RAW:
                self.raw = value
            elif number in (_EXTERNAL, _LOCATION) and (wire == 2 or value):
                self.external = True

    def viewable(self) -> bool:
        return (self.raw is not None and not self.external and self.elem in _DTYPES
                and all(d >= 0 for d in self.dims) and math.prod(self.dims) > STEERING_SIZE)

    def array(self, data, where: str) -> np.ndarray:
        dtype = np.dtype(_DTYPES[self.elem])
        start, end = self.raw
        if end - start != math.prod(self.dims) * dtype.itemsize:
            raise OnnxError(f"{where}: tensor {self.name!r}: its data does not match its dims "
                            f"{self.dims} and type ({end - start} bytes of raw data)")
        array = np.frombuffer(data, dtype, math.prod(self.dims), start)
        array.flags.writeable = False  # of `FileBytes` too: only a rewrite given them writes
        array = array.reshape(self.dims)
        return array if dtype.isnative else array.astype(dtype.newbyteorder("="))


def split(data: bytes | FileBytes, where: str, meter=None):
    """(the model without its large initializers, {name: read-only array viewing `data`}).
    The parsed message's bytes are charged to `meter` (a `budget.Meter`) before it is parsed."""
    light, found = data, []
    if sys.byteorder == "little" and isinstance(data, (bytes, FileBytes)):
        try:
            light, found = _strip(data)
        except ValueError:  # not a well-formed message: protobuf says why
            light, found = data, []
    if meter is not None:
        meter.charge(len(light), f"{where}: the model's message")
    if not isinstance(light, bytes):  # (not stripped: read whole by protobuf, which wants bytes)
        light = bytes(light)
    model = proto.load_model(light)
    if not found:
        return model, {}
    weights = {t.name: t.array(data, where) for t in found}
    names = Counter([t.name for t in found] + [i.name for i in model.graph.initializer])
    twice = next((t.name for t in found if names[t.name] > 1), None)
    if twice is not None:  # the checker's words for it, which no longer sees both
        raise OnnxError(f"{where}: invalid ONNX model: {twice} initializer name is not unique")
    _as_inputs(model, found)
    return model, weights


def _strip(data: bytes) -> tuple[bytes, list[_Tensor]]:
    found: list[_Tensor] = []
    parts: list[bytes] = []
    for number, wire, value, begin, end in _fields(data, 0, len(data)):
        if number == _MODEL_GRAPH and wire == 2:
            parts.append(_field(_MODEL_GRAPH, _strip_graph(data, value, found)))
        else:
            parts.append(data[begin:end])
    return b"".join(parts), found


def _strip_graph(data: bytes, span, found: list[_Tensor]) -> bytes:
    parts = []
    for number, wire, value, begin, end in _fields(data, *span):
        if number == _GRAPH_INIT and wire == 2:
            tensor = _Tensor(data, value)
            if tensor.viewable():
                found.append(tensor)
                continue
        parts.append(data[begin:end])
    return b"".join(parts)


def _as_inputs(model, tensors: list[_Tensor]) -> None:
    """Each viewed weight as a graph input of its type and shape (unless it is one already)."""
    graph = model.graph
    inputs = {i.name for i in graph.input}
    for t in tensors:
        if t.name not in inputs:
            graph.input.append(proto.make_tensor_value_info(t.name, t.elem, t.dims))
            inputs.add(t.name)


# -- writing -----------------------------------------------------------------------------------
def separable(array: np.ndarray) -> bool:
    """Whether the exporter keeps this initializer as an array until the model is written."""
    return array.size > STEERING_SIZE and array.dtype.newbyteorder("<").str in _ELEMS


_ELEMS = {np.dtype(d).newbyteorder("<").str: elem for elem, d in _DTYPES.items()}


def _little(array: np.ndarray) -> np.ndarray:
    """The array's elements, C-ordered and little-endian (itself when it already is so)."""
    return np.ascontiguousarray(array, array.dtype.newbyteorder("<"))


def elem_of(array: np.ndarray) -> int:
    """The ONNX element type of an array the exporter keeps separate."""
    return _ELEMS[array.dtype.newbyteorder("<").str]


@contextlib.contextmanager
def as_inputs(model, arrays: Mapping[str, np.ndarray]) -> Iterator[None]:
    """The model with its separate arrays as typed graph inputs while inside (onnx's checker
    and shape inference see their types and shapes, not their values); removed after."""
    graph = model.graph
    count = len(graph.input)
    graph.input.extend(proto.make_tensor_value_info(name, elem_of(a), a.shape)
                       for name, a in arrays.items())
    try:
        yield
    finally:
        del graph.input[count:]


def add_to(model, arrays) -> None:
    """The arrays as the model's initializers (each copied once, into the message)."""
    for name, array in arrays.items():
        tensor = model.graph.initializer.add()
        tensor.name, tensor.data_type = name, elem_of(array)
        tensor.dims.extend(array.shape)
        tensor.raw_data = _little(array).tobytes()


def write(file, model, arrays, check: Callable[[Any, Any], None] | None = None) -> None:
    """The model completed by the arrays as initializers, serialised to a binary file: the
    model's message, then one message per array that protobuf merges into its graph, whose
    bytes are written from the array itself (no copy of the weights is made).

    With `check(model, arrays)` (the exporter's `refused.check`, which raises for a model that
    must not be written), the file is written on a thread of its own while the check runs on
    this one: the kernel copies the bytes while the interpreter checks, and the check's error
    is raised once the writing has stopped (the caller's `staged_files` then removes the
    file, so a refused model is never in place; it syncs the file before putting it in
    place)."""
    message = model.SerializeToString()  # before the check, which changes the model a moment
    _check_unchanged(arrays)  # a file cut shorter is not read past its end (a bus error)
    if check is None:
        _write_parts(file, message, arrays)
    else:
        writing = Background(lambda: _write_parts(file, message, arrays))
        try:
            check(model, arrays)
        except BaseException:
            writing.wait()  # the refusal is the error to report, not what the writing met
            raise
        writing.result()
    _check_unchanged(arrays)


def _check_unchanged(arrays) -> None:
    """Raise if a model file the arrays view (mapped: `ir.filebytes`) has changed since it was
    mapped: the weights written may then be some of each version (after writing), or some
    not there any more (before)."""
    sources = {id(b): b for a in arrays.values() if isinstance(b := root(a), FileBytes)}
    for source in sources.values():
        name = changed(source)
        if name is not None:
            raise _changed_error(name)


def _changed_error(name: str) -> OnnxError:
    """The refusal to write a model whose file `name` changed while it was read."""
    return OnnxError(f"{name}: the model file changed while it was read; not written")


def _write_parts(out, message: bytes, arrays) -> None:
    """The message, then each array as a message merging into the graph (see `write`), the
    disk given the bytes as they come (`ir.writeback`)."""
    writeback = Writeback(out)
    out.write(message)
    for name, array in arrays.items():
        header = proto.TensorProto(name=name, data_type=elem_of(array), dims=array.shape)
        raw = _encode_varint(_RAW << 3 | 2) + _encode_varint(array.nbytes)
        tensor = header.SerializeToString() + raw
        size = len(tensor) + array.nbytes
        init = _encode_varint(_GRAPH_INIT << 3 | 2) + _encode_varint(size)
        graph = _encode_varint(_MODEL_GRAPH << 3 | 2) + _encode_varint(len(init) + size)
        out.write(graph + init + tensor)
        copied = _copy_from_file(out, array)
        if copied:
            writeback.advanced()
            _write_bytes(out, memoryview(array.reshape(-1).view(np.uint8))[copied:], writeback)
            continue
        for block in _blocks(array):
            _write_bytes(out, memoryview(_little(block).reshape(-1).view(np.uint8)), writeback)


#: The most bytes given to one `write` call. The kernel measured (6.18, ext4) gives a large
#: write large page-cache folios, and finding memory for those now and then stalls the write
#: for 0.3-1.2 s (3 of 50 writes of a 98 MiB file in 8 MiB calls, none in 1 MiB calls).
WRITE_BYTES = 1 << 20


def _write_bytes(out, data: memoryview, writeback: Writeback) -> None:
    """`out.write(data)` in calls of at most WRITE_BYTES (no copy: slices of the view)."""
    for start in range(0, len(data), WRITE_BYTES):
        out.write(data[start:start + WRITE_BYTES])
        writeback.advanced()


#: What `copy_file_range` answers where it cannot copy between these two files (another file
#: system, an old kernel, a file system without it): the bytes are then written from memory.
_CANNOT_COPY = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF}


def _copy_from_file(out, array: np.ndarray) -> int:
    """How many of the array's bytes the kernel copied into `out` straight from the model
    file it views (mapped and unchanged there: `filebytes.file_span`), 0 if none.

    A weight no rule changed is the same bytes in the model read and the model written;
    `copy_file_range` moves them from the one file's page cache to the other's without this
    process reading them, and on the machine measured at a steady 0.25-0.3 s of system time
    for 548 MiB where writing them from memory took 0.2-2.3 s. The file's bytes are its
    bytes now: the writer checks that it has not changed since it was mapped."""
    span = file_span(array) if hasattr(os, "copy_file_range") else None
    if span is None or array.dtype != array.dtype.newbyteorder("<"):
        return 0
    source, offset = span
    try:
        target = out.fileno()
    except (AttributeError, OSError):  # not a file of the system (io.BytesIO...)
        return 0
    out.flush()
    done = 0
    while done < array.nbytes:
        try:
            n = os.copy_file_range(source, target, array.nbytes - done, offset + done)
        except OSError as e:
            if e.errno in _CANNOT_COPY:
                return done
            raise
        if n == 0:  # the file ends before the weight: it was cut shorter
            raise _changed_error(changed(root(array)) or "the model file")
        done += n
    return done


class Background:
    """`run()` on a thread of its own, for work that waits on the kernel (reading or writing
    a file), which releases the interpreter meanwhile; `result()` waits for it and
    returns what it returned, or raises what it raised."""

    def __init__(self, run: Callable[[], Any]):
        self._run, self._value, self._error = run, None, None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._work, name="ngrules-io", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            self._value = self._run()
        except BaseException as e:  # re-raised by result(), on the caller's thread
            self._error = e
        finally:
            self._done.set()

    def wait(self) -> None:
        """Join the thread. A Ctrl-C meanwhile is raised once it has stopped: the caller then
        closes the file the thread reads or writes, which it must not do under the thread."""
        interrupted = None
        while not self._done.is_set():  # not `join`: interrupted, it takes the thread as ended
            try:
                self._done.wait()
            except KeyboardInterrupt as e:
                interrupted = e
        if interrupted is not None:
            raise interrupted

    def result(self) -> Any:
        self.wait()
        if self._error is not None:
            raise self._error
        return self._value


#: A weight stored in another order (a transposed view) is written this many bytes at a time,
#: so writing it never holds a second copy of it.
BLOCK_BYTES = 1 << 24


def _blocks(array: np.ndarray):
    """The array as consecutive slices of its first axis whose C orders, one after another,
    are its own: itself when it is already C-ordered."""
    if array.ndim == 0 or array.flags.c_contiguous:
        yield array
        return
    rows = max(1, BLOCK_BYTES // max(array[0].nbytes, 1))
    for start in range(0, array.shape[0], rows):
        yield array[start:start + rows]
