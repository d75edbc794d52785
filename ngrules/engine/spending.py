"""Folding into spent bytes: a folded weight written over the weight it is computed from.

`rewrite(..., spend=buffer)`, from a caller that reads none of its input graph again (the
`apply` command), gives the rewrite a model file's bytes (`ir.filebytes.FileBytes`, which the
model's weights view). `fold_constants` then writes an elementwise value such as `w * s` (a
batchnorm's scale folded into a convolution's weight) into the bytes of `w` instead of new
memory: no second copy of the weights is held, and the kernel writes pages already in memory
rather than fresh ones the kernel must fault in (on some machines most of a fold's time).

Only bytes nothing else can read are written, those of a Constant `w` of the graph being
folded such that:
- its value views the spent buffer and no other Constant of the graph overlaps its bytes;
- the graph reads it exactly once (outputs count), through views each read exactly once, all
  unchanged by the walk, by the node being folded;
- that operand covers its bytes exactly, element for element (a permutation of a dense block:
  transposes and unit axes, no broadcast), in the node's shape and dtype, as every operand is;
- the node's kernel is a numpy ufunc, which computes in place exactly as into new memory.
A Constant a folded value turns out equal to (hash-consing returns it) is read again, so it is
never written after that; once folded, the composites recorded over a written Constant are
forgotten (`composite.forget`), so no later pass brings the old node back. Each range written
is noted on the buffer (`FileBytes.wrote`): the writer, which copies a mapped file's unchanged
weights from the file itself, writes those ranges from memory.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import chain

import numpy as np

from ngrules.ir import composite
from ngrules.ir.filebytes import FileBytes, root
from ngrules.ir.graph import Node
from ngrules.ir.ops import get_op

_ARGS = operator.attrgetter("args")


class Spending:
    """The Constants of one graph whose bytes one folding walk may write (see the module)."""

    def __init__(self, buffer: FileBytes, order: Sequence[Node], outputs: Sequence[Node]):
        self.buffer = buffer
        self.spent: list[Node] = []
        self.reads: Counter[Node] = Counter(outputs)
        self.reads.update(chain.from_iterable(map(_ARGS, order)))  # each argument of each node
        regions = sorted((_bounds(n.attrs["value"]), id(n), n) for n in order
                         if n.op == "Constant" and n.attrs["value"].size
                         and root(n.attrs["value"]) is buffer)
        self.candidates = {n: bounds for bounds, _, n in _alone(regions) if self.reads[n] == 1}
        self.address = np.frombuffer(buffer, np.uint8).ctypes.data if self.candidates else 0

    def fold(self, node: Node, kernel, values: Sequence[np.ndarray],
             memo: Mapping[Node, Node]) -> np.ndarray | None:
        """node's value, `kernel` (its op's, built once by the caller) on `values`, computed
        into the bytes of a Constant only it reads (read-only), or None when there is none (or
        the kernel is not an elementwise ufunc): then compute as usual."""
        if not self.candidates or not isinstance(kernel, np.ufunc) or kernel.nout != 1 \
                or kernel.nin != len(values):
            return None
        sources = [self._source(arg, memo) for arg in node.args]  # most often none: first
        if sources.count(None) == len(sources) or not get_op(node.op).has("elementwise"):
            return None
        shape, dtype = tuple(node.axes.lengths), np.dtype(node.dtype)
        if any(v.dtype != dtype for v in values) or \
                np.broadcast_shapes(*(v.shape for v in values)) != shape:
            return None
        for source, value in zip(sources, values):
            bounds = None if source is None else self.candidates[source]
            out = None if bounds is None else self._over(value, shape, bounds)
            if out is not None:
                del self.candidates[source]
                self.spent.append(source)
                self.buffer.wrote(bounds[0] - self.address, bounds[1] - self.address)
                with np.errstate(all="ignore"):  # as at run time: inf and nan are values
                    kernel(*values, out=out)
                out.flags.writeable = False
                return out
        return None

    def taken(self, constant: Node) -> None:
        """A fold's result is `constant`: if it is a Constant of the graph (an equal value,
        found by hash-consing), it has another reader now and is no longer written."""
        self.candidates.pop(constant, None)

    def finish(self) -> None:
        """Forget the composites recorded over the Constants written over."""
        if self.spent:
            composite.forget(self.spent)

    def _source(self, arg: Node, memo: Mapping[Node, Node]) -> Node | None:
        """The candidate Constant under arg's chain of views, each of the input graph,
        unchanged by the walk and read once; else None."""
        node = arg
        while self.reads[node] == 1 and memo.get(node) is node:
            if node.op == "Constant":
                return node if node in self.candidates else None
            if len(node.args) != 1 or not get_op(node.op).has("view"):
                return None
            node = node.args[0]
        return None

    def _over(self, value: np.ndarray, shape: tuple, bounds: tuple[int, int]):
        """A writable array over the buffer, aliasing `value` exactly, when value covers the
        bytes `bounds` element for element in `shape`; else None."""
        if value.shape != shape or _bounds(value) != bounds or not _dense(value):
            return None
        return np.ndarray(shape, value.dtype, self.buffer, bounds[0] - self.address,
                          value.strides)


def _bounds(array: np.ndarray) -> tuple[int, int]:
    """The addresses of the first and one past the last byte the array's elements occupy."""
    low = high = array.ctypes.data
    for stride, length in zip(array.strides, array.shape):
        if stride < 0:
            low += stride * (length - 1)
        else:
            high += stride * (length - 1)
    return low, high + array.itemsize


def _dense(array: np.ndarray) -> bool:
    """Whether the array's elements are a dense block, each byte in one element: its axes
    longer than 1, by stride, are a C order of some permutation (no broadcast, no gaps)."""
    step = array.itemsize
    for stride, length in sorted((s, n) for s, n in zip(array.strides, array.shape) if n > 1):
        if stride != step:
            return False
        step *= length
    return True


def _alone(regions: list) -> list:
    """The regions ((low, high), id, node), sorted by low, that overlap no other."""
    found, reach = [], None
    for i, region in enumerate(regions):
        (low, high), _, _ = region
        after = regions[i + 1][0][0] if i + 1 < len(regions) else high
        if (reach is None or low >= reach) and high <= after:
            found.append(region)
        reach = high if reach is None else max(reach, high)
    return found
