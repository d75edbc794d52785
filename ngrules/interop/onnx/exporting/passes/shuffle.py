"""A channel shuffle read only by convolutions is absorbed into their weights; another is
one Gather.

ShuffleNet mixes the channels of its two branches with `Reshape -> Transpose -> Reshape`
([N, C, ...] -> [N, g, C/g, ...] -> [N, C/g, g, ...] -> [N, C, ...]): a permutation p of the
channels, out[:, c] = x[:, p[c]]. A convolution reading such a value computes the same with
its weights' input channels permuted instead (W[:, q], q = argsort(p)); a depthwise
convolution (group = C) reads each channel alone, so its filters and bias are permuted (W[q])
and its output carries the permutation p on to its own readers. Where every reader absorbs
it, the three nodes go (one Reshape stays when the shuffle also changes the rank): fewer
standard ONNX nodes and one Transpose (a copy) less (ShuffleNet 43 -> 35 nodes, 0.99x ->
0.85x the input's onnxruntime time). The permutation is found by pushing indices through the
chain, so only a chain that moves whole channels is taken.
"""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx import proto
from ngrules.interop.onnx.exporting.passes.inferred import value_shapes
from ngrules.interop.onnx.written import (
    Weights,
    WrittenGraph,
    attribute,
    attributes,
    is_standard,
    read,
    replace,
)

_MAX_INDICES = 1 << 20  # the chain's value pushed as indices: no larger


def _chain(g: WrittenGraph, last):
    """(r1, t, last) for Reshape -> Transpose -> Reshape ending at `last`, inner values read
    once, or None."""
    t = g.producer.get(last.input[0])
    r1 = g.producer.get(t.input[0]) if is_standard(t, "Transpose") else None
    if not is_standard(r1, "Reshape") or g.only_reader(r1.output[0]) is not t:
        return None
    return (r1, t, last) if g.only_reader(t.output[0]) is last else None


def _permutation(g: WrittenGraph, weights: Weights, chain) -> np.ndarray | None:
    """p with out[:, c] = x[:, p[c]] (the rest in place), or None."""
    r1, t, r2 = chain
    x_shape, out_shape = g.shapes.get(r1.input[0]), g.shapes.get(r2.output[0])
    s1, s2 = weights.value(r1.input[1]), weights.value(r2.input[1])
    shapes = (x_shape, out_shape)
    if any(s is None or not s or not all(isinstance(d, int) and d > 0 for d in s)
           for s in shapes) or s1 is None or s2 is None:
        return None
    n, c = x_shape[:2]
    size = int(np.prod(x_shape))
    if size > _MAX_INDICES or out_shape[:2] != (n, c) or int(np.prod(out_shape)) != size:
        return None
    try:
        moved = np.arange(size).reshape([int(d) for d in s1]).transpose(attribute(t, "perm"))
        moved = moved.reshape([int(d) for d in s2])
    except ValueError:  # a reshape with 0 or -1 that these shapes do not explain
        return None
    if moved.shape != tuple(out_shape):
        return None
    rest = size // (n * c)
    p = moved.reshape(n, c, rest)[0, :, 0] // rest
    indices = np.arange(size).reshape(n, c, rest)
    return p if np.array_equal(moved.reshape(n, c, rest), indices[:, p, :]) else None


def _plan(g: WrittenGraph, weights: Weights, value: str, p, changes: list) -> bool:
    """Add to `changes` the (conv, new weight inputs) that absorb the permutation p carried by
    `value`; False when a reader cannot."""
    readers = g.readers(value)
    if not readers or value in g.outputs:
        return False
    q = np.argsort(p)  # x's channel c is the shuffled value's channel q[c]
    for conv in readers:
        w = weights.value(conv.input[1]) if is_standard(conv, "Conv") else None
        if w is None or list(conv.input).count(value) != 1 or conv.input[0] != value:
            return False
        group = int(attribute(conv, "group", 1))
        if group == 1 and w.shape[1] == len(p):
            changes.append((conv, [np.ascontiguousarray(w[:, q])], None))
        elif group == len(p) == w.shape[0] and w.shape[1] == 1:
            bias = weights.value(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else None
            if len(conv.input) > 2 and conv.input[2] and bias is None:
                return False
            changes.append((conv, [np.ascontiguousarray(w[q])], None if bias is None else bias[q]))
            if not _plan(g, weights, conv.output[0], p, changes):
                return False
        else:
            return False
    return True


def _absorb(g: WrittenGraph, weights: Weights, last, make_node) -> bool:
    chain = _chain(g, last)
    p = _permutation(g, weights, chain) if chain else None
    changes: list = []
    if p is None:
        return False
    if not _plan(g, weights, last.output[0], p, changes):
        return _gathered(g, weights, chain, p, make_node)
    for conv, (w,), bias in changes:
        inputs = list(conv.input)
        inputs[1] = weights.add(w)
        if bias is not None:
            inputs[2] = weights.add(bias)
        attrs = attributes(conv)
        replace(g, [conv], make_node("Conv", inputs, list(conv.output), name=conv.name, **attrs),
                at=conv)
    r1, t, r2 = chain
    x = r1.input[0]
    if g.shapes.get(x) == g.shapes.get(r2.output[0]):  # the readers read x itself
        g.read_instead(r2.output[0], x)
        g.drop(r1, t, r2)
    else:  # the rank changes: one Reshape of x
        replace(g, [r1, t, r2], make_node("Reshape", [x, r2.input[1]], list(r2.output)), at=r2)
    return True


def _gathered(g: WrittenGraph, weights: Weights, chain, p, make_node) -> bool:
    """A shuffle some reader cannot absorb (a grouped convolution: the shuffle mixes its
    groups) as one Gather of the channels where it keeps the rank: 3 nodes -> 1, and
    onnxruntime's Gather copies each channel's plane as the Transpose did (0.86-1.0x its time
    at ShuffleNet's sizes)."""
    r1, t, r2 = chain
    x = r1.input[0]
    if g.shapes.get(x) != g.shapes.get(r2.output[0]):
        return False
    indices = weights.add(np.asarray(p, np.int64))
    replace(g, [r1, t, r2], make_node("Gather", [x, indices], list(r2.output), axis=1), at=r2)
    return True


def absorb_in_model(model, arrays: dict, fresh) -> None:
    """Absorb the model's channel shuffles into the convolutions reading them (in place; new
    weights named by `fresh()`, added to `arrays` where the exporter keeps such arrays)."""
    if not any(is_standard(n, "Transpose") for n in model.graph.node):
        return
    try:
        shapes = value_shapes(model, arrays)
    except Exception:  # onnx's inference errors have no common exported type
        return
    constants = {t.name: tuple(t.dims) for t in model.graph.initializer}
    constants.update((name, a.shape) for name, a in arrays.items())
    g = WrittenGraph(list(model.graph.node), {o.name for o in model.graph.output}, shapes,
                     constants)
    weights = Weights(model, arrays, constants, fresh)
    changed = False
    for node in list(g.nodes):
        if id(node) not in g.dropped and is_standard(node, "Reshape"):
            changed |= _absorb(g, weights, node, proto.make_node)
    if changed:
        kept = read(g, [n for n in g.nodes if id(n) not in g.dropped])
        del model.graph.node[:]
        model.graph.node.extend(kept)
        weights.drop_unread(kept)
