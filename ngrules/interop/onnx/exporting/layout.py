"""Where the exporter keeps each value's dimensions: a physical order chosen per value.

An ngrules node's axes are named, so the order ONNX stores them in is the exporter's choice.
Each exported value is a `Value`: the ONNX name (or a constant not yet written) and what each
of its physical dimensions holds. A view (ReorderAxes, Broadcast, AxesCast, dropping a length-1
axis) changes only that record and writes nothing; ONNX's own broadcasting stands in for
`Expand`; a Transpose, Reshape or Expand is written only where an op needs its operand in one
order (`Layouts.exact`) or aligned for broadcasting (`Layouts.aligned`). So a model read from
ONNX goes back out in the order it came in: the placeholders carry ONNX's order and every op
keeps the order of its operands (Conv and pooling their NCHW form).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ngrules.interop.onnx.importing.context import READ_AS_FLATTEN, READ_AS_RESHAPE
from ngrules.ir.axes import Axis
from ngrules.ir.graph import Node

#: doc_string of the Reshape written back for a node in `READ_AS_RESHAPE` (removed by `unit_views`).
KEPT_RESHAPE = "ngrules:reshape-as-read"
#: doc_string of the Reshape written back for a node in `READ_AS_FLATTEN`.
KEPT_FLATTEN = "ngrules:flatten-as-read"


@dataclass(frozen=True, eq=False)
class Value:
    """An exported tensor: `dims[i]` is the axis physical dimension i holds, `shape[i]` its
    length there (the axis's, or 1 where the value is broadcast along it, or 1 for a unit
    dimension whose axis the node does not have). A node's axis missing from `dims` is
    broadcast. `array` holds a constant not written yet (laid out as `dims`)."""

    dims: tuple[Axis, ...]
    shape: tuple[int, ...]
    name: str | None = None
    array: np.ndarray | None = None

    def full(self, axis: Axis) -> bool:
        """Whether the axis is present at its whole length."""
        return axis in self.dims and self.shape[self.dims.index(axis)] == axis.length

    def has_all(self, axes) -> bool:
        return all(self.full(a) or a.length == 1 for a in axes)


def full_value(name: str, axes: Sequence[Axis]) -> Value:
    """An ONNX value holding `axes` in this order."""
    axes = tuple(axes)
    return Value(axes, tuple(a.length for a in axes), name)


def constant_value(array: np.ndarray, axes: Sequence[Axis]) -> Value:
    axes = tuple(axes)
    return Value(axes, tuple(a.length for a in axes), array=np.asarray(array))


class Layouts:
    """The Emitter's side that moves values between orders; `node()` and `const()` come from
    the Emitter."""

    values: dict[Node, Value]

    def __init_layouts__(self) -> None:
        self.values = {}
        self._written: dict[int, tuple[np.ndarray, str]] = {}
        self._exact: dict[tuple, str] = {}

    # -- primitives on values ------------------------------------------------------------------
    def name_of(self, v: Value) -> str:
        """The ONNX name of a value (a constant is written as an initializer once)."""
        if v.name is not None:
            return v.name
        key = id(v.array)
        if key not in self._written:
            self._written[key] = (v.array, self.const(v.array, dtype=v.array.dtype))
        return self._written[key][1]

    def permuted(self, v: Value, perm: Sequence[int]) -> Value:
        perm = list(perm)
        if perm == list(range(len(perm))):
            return v
        dims = tuple(v.dims[i] for i in perm)
        shape = tuple(v.shape[i] for i in perm)
        if v.array is not None:
            return Value(dims, shape, array=v.array.transpose(perm))  # copied when written
        return Value(dims, shape, self.node("Transpose", [v.name], perm=perm))

    def reshaped(self, v: Value, dims: Sequence[Axis], shape: Sequence[int]) -> Value:
        dims, shape = tuple(dims), tuple(int(s) for s in shape)
        if shape == v.shape:
            return Value(dims, shape, v.name, v.array)
        if v.array is not None:
            return Value(dims, shape, array=v.array.reshape(shape))
        return Value(dims, shape, self.node("Reshape", [v.name, self.const(list(shape))]))

    # -- what ops ask for ----------------------------------------------------------------------
    def exact(self, node: Node, order: Sequence[Axis] | None = None) -> str:
        """The node's data with exactly the dimensions `order` (the node's axes by default;
        axes left out must have length 1), at full length."""
        order = tuple(node.axes if order is None else order)
        key = (node, order)
        if key not in self._exact:
            written = len(self.nodes)
            self._exact[key] = self._materialize(self.values[node], order)
            if node in READ_AS_RESHAPE:  # the model's Reshape, written back as one
                mark = KEPT_FLATTEN if node in READ_AS_FLATTEN else KEPT_RESHAPE
                for nd in self.nodes[written:]:
                    if nd.op_type == "Reshape" and not nd.doc_string:
                        nd.doc_string = mark
        return self._exact[key]

    def _materialize(self, v: Value, order: tuple[Axis, ...]) -> str:
        v = self._in_order(v, order)
        shape = tuple(v.shape[v.dims.index(a)] if a in v.dims else 1 for a in order)
        v = self.reshaped(v, order, shape)
        lengths = tuple(a.length for a in order)
        if shape == lengths:
            return self.name_of(v)
        if v.array is not None and v.array.size * 4 >= np.prod(lengths, dtype=np.int64):
            return self.name_of(Value(order, lengths, array=np.broadcast_to(v.array, lengths)))
        return self.node("Expand", [self.name_of(v), self.const(list(lengths))])

    def _in_order(self, v: Value, order: Sequence[Axis]) -> Value:
        """v transposed so that its dimensions longer than 1 come in `order`'s relative order;
        dimensions of length 1 stay where they are (a reshape moves those), so the Transpose
        moves no more dimensions than it must (onnxruntime's is slower for every extra one)."""
        long = _long_positions(v, order)
        if long == sorted(long):
            return v
        perm = list(range(len(v.dims)))
        for slot, i in zip(sorted(long), long):
            perm[slot] = i
        return self.permuted(v, perm)

    @staticmethod
    def ordered(v: Value, order: Sequence[Axis]) -> bool:
        """Whether v's dimensions longer than 1 already come in `order`'s relative order
        (`_in_order` would write nothing); writes nothing itself."""
        long = _long_positions(v, order)
        return long == sorted(long)

    def aligned(self, node: Node, target: Sequence[Axis], rank: bool = False) -> str:
        """The node's data shaped to broadcast against `target` (numpy's rule: right-aligned,
        length 1 where it is broadcast); written as is when it already does (with `rank`, only
        if it has no more dimensions than `target`: Gemm's C may not have leading units)."""
        target = tuple(target)
        v = self._in_order(self.values[node], target)
        present = [d for d in v.dims if d in target]
        if not present:
            return self.name_of(self.reshaped(v, (), ()))
        start = min(target.index(d) for d in present)
        flatten = node in READ_AS_FLATTEN and all(a.length == 1 for a in target[:start])
        dims = target[0 if flatten else start:]  # (a model's Flatten: its leading 1s as read)
        shape = tuple(v.shape[v.dims.index(a)] if a in v.dims else 1 for a in dims)
        if _strip(v.shape) == _strip(shape) and _units_only_ahead(v, present) and (
                not rank or len(v.shape) <= len(target)) and not flatten:
            return self.name_of(v)
        written = len(self.nodes)
        out = self.name_of(self.reshaped(v, dims, shape))
        if flatten and len(self.nodes) > written and self.nodes[-1].op_type == "Reshape":
            self.nodes[-1].doc_string = KEPT_FLATTEN  # `unit_views`: the Flatten
        return out

    def array(self, node: Node) -> np.ndarray:
        """A constant node's data in its own order of axes."""
        v = self._in_order(self.values[node], tuple(node.axes))
        shape = tuple(v.shape[v.dims.index(a)] if a in v.dims else 1 for a in node.axes)
        return np.broadcast_to(v.array.reshape(shape), node.axes.lengths)

    def complete(self, node: Node, axes: Sequence[Axis] = ()) -> Value:
        """The node's value with `axes` (all of them by default) present at full length."""
        v = self.values[node]
        want = tuple(axes) or tuple(node.axes)
        if all(v.full(a) for a in want):
            return v
        order = tuple(d for d in v.dims if d in node.axes)
        order += tuple(a for a in node.axes if a not in order)
        return full_value(self.exact(node, order), order)


def _long_positions(v: Value, order: Sequence[Axis]) -> list[int]:
    """The positions in v of its dimensions longer than 1 that `order` holds, in `order`'s
    order."""
    rank = {a: i for i, a in enumerate(order)}
    return sorted((i for i, d in enumerate(v.dims) if d in rank and v.shape[i] > 1),
                  key=lambda i: rank[v.dims[i]])


def _strip(shape: Sequence[int]) -> tuple[int, ...]:
    shape = list(shape)
    while shape and shape[0] == 1:
        shape.pop(0)
    return tuple(shape)


def _units_only_ahead(v: Value, present: list[Axis]) -> bool:
    """Whether every dimension outside `present` comes before the first present one (so that
    ONNX's right alignment ignores it), i.e. present dims are the trailing ones."""
    first = v.dims.index(present[0])
    return tuple(v.dims[first:]) == tuple(present)
