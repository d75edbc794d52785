"""A Slice to a symbolic length, as the Range and Gather it means.

`position_ids[:, :S]` and GPT-2's `bias[:, :, :S, :S]` slice a constant buffer (256 or 1024
long) up to the sequence length. With S a stand-in (`ir.symbolic`, larger than any static
dimension), ONNX's shape inference clamps the end to the buffer's length and every shape after
it is wrong. So before inference such a Slice (bounds known, computed from a symbol, steps 1)
becomes, per sliced axis, `Gather(x, Range(start, end, 1), axis)`: inference then gives the
symbolic length, the importer makes the Range positions along the input's axis of that length
(`AxisIndex`), and the model written back slices at run time (correct for any S the buffer
holds). A Slice of one axis from 0 is recorded (`record`) on the Gather node it became, and
the exporter writes that node back as a Slice whose end is the run-time length
(`dynamic.slice_back`): the model's own node. A rule that rewrites the Gather, its data or
its positions makes another node, which is written as what it is.
"""

from __future__ import annotations

import weakref

import numpy as np

from ngrules.interop.onnx import proto
from ngrules.ir import symbolic
from ngrules.ir.graph import Node

#: a Gather node read from a model's Slice of one axis from 0 to a symbolic length -> the
#: number of inputs that Slice had (3 to 5: axes and steps are written where it had them).
SLICED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def record(importer) -> None:
    """Note the Gather each symbolic Slice of one axis from 0 became (`SLICED`)."""
    for name, inputs in importer.folding.sliced.items():
        node = getattr(importer.values.get(name), "node", None)
        node = None if node is None else _renamed_from(node)
        if node is not None and node.op == "Gather" and positions(node) is not None:
            SLICED[node] = inputs


def positions(gather: Node) -> Node | None:
    """The `AxisIndex` a Gather reads its positions from (through renamings), or None."""
    index = _renamed_from(gather.args[1])
    return index if index.op == "AxisIndex" else None


def _renamed_from(node: Node) -> Node:
    """The node under any renamings (`AxesCast`) of it."""
    while node.op == "AxesCast":
        node = node.args[0]
    return node


def as_gathers(folding, node) -> tuple[list, dict[str, np.ndarray]] | None:
    """The nodes (and scalar constants) computing `node` this way, or None when it is not a
    Slice whose bounds count a symbolic length."""
    if node.op_type != "Slice" or len(node.input) < 3 or node.domain not in ("", "ai.onnx"):
        return None
    data, starts, ends, axes, steps = (list(node.input) + ["", ""])[:5]
    bounds = [n for n in (starts, ends, axes, steps) if n]
    if not any(n in folding.symbolic for n in (starts, ends)) or not all(
            n in folding.consts for n in bounds):
        return None
    shape = folding.shapes.shape.get(data)
    if shape is None:
        return None
    lows, highs = (np.ravel(folding.consts[n]).astype(np.int64).tolist() for n in (starts, ends))
    dims = (np.ravel(folding.consts[axes]).tolist() if axes else list(range(len(lows))))
    if steps and any(int(s) != 1 for s in np.ravel(folding.consts[steps])):
        return None
    if any(v < 0 and symbolic.symbols_of(abs(v)) for v in lows + highs):
        return None

    nodes, consts, current = [], {}, data
    out = node.output[0]
    for k, (low, high, dim) in enumerate(zip(lows, highs, dims)):
        dim = int(dim) % len(shape)
        length = shape[dim]
        if length is None:
            return None
        low = max(low + length, 0) if low < 0 else low
        high = high + length if high < 0 else high
        if not symbolic.symbols_of(high):
            high = min(high, length)
        names = [f"{out}__range{k}_{part}" for part in ("start", "end", "step", "at", "out")]
        consts.update({names[0]: np.array(low), names[1]: np.array(high), names[2]: np.array(1)})
        nodes.append(proto.make_node("Range", names[:3], [names[3]]))
        nodes.append(proto.make_node("Gather", [current, names[3]], [names[4]], axis=dim))
        current = names[4]
    nodes[-1].output[0] = out
    return nodes, consts
