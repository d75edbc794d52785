"""Transpose -> Reshape -> Transpose written as Reshape -> Transpose.

Heads are split out of a projection as `Transpose` (to the order a value has), `Reshape` (the
features into heads and head size) and `Transpose` (to `[B, H, S, D]`); where the Reshape only
splits dimensions (and drops unit ones), splitting them in the first Transpose's input and
moving every dimension once is the same tensor: one copy of the data instead of two (each
Transpose copies; on a transformer encoder's attention, six Transposes per layer became three).
Shapes come from onnx's inference over the written model; a model it cannot infer is left as
it is.
"""

from __future__ import annotations

import math

import numpy as np

from ngrules.interop.onnx import ndarrays, proto
from ngrules.interop.onnx.exporting.passes.inferred import value_shapes


def _splits(sy: list[int], s2: list[int]) -> list[list[int]] | None:
    """For each dimension of sy, the dimensions of s2 it is split into, in order ([] for a
    unit one dropped; a unit dimension of s2 goes with the dimension before it), or None when
    the reshape does more than split dimensions and add or drop units."""
    big = [i for i, length in enumerate(s2) if length != 1]
    groups, j = [], 0
    for length in sy:
        group, size = [], 1
        while length != 1 and j < len(big) and size < length:
            group.append(big[j])
            size, j = size * s2[big[j]], j + 1
        if size != length:
            return None
        groups.append(group)
    owners = [g for g in groups if g]
    if j != len(big) or not owners:
        return None
    for i, length in enumerate(s2):
        if length == 1:
            owner = max((g for g in owners if g[0] < i), key=lambda g: g[0], default=owners[0])
            owner.append(i)
            owner.sort()
    return groups


def _joined(x_shape, p1, s2, p2):
    """(shape to reshape x to, the one perm after it), or None."""
    sy = [x_shape[i] for i in p1]
    groups = _splits(sy, s2)
    if groups is None:
        return None
    order = []  # the s2 dimensions in x's order
    for d in range(len(x_shape)):
        order.extend(groups[p1.index(d)])
    return [s2[i] for i in order], [order.index(i) for i in p2]


def join(nodes: list, shapes: dict, const_of, make_node, new_const) -> bool:
    """Rewrite the chains in `nodes` (in place); `const_of(name)` gives a constant's ints,
    `new_const(ints)` writes one and gives its name."""
    producer = {y: n for n in nodes for y in n.output}
    readers: dict[str, int] = {}
    for n in nodes:
        for x in n.input:
            readers[x] = readers.get(x, 0) + 1
    changed = False
    for t2 in list(nodes):
        r = producer.get(t2.input[0]) if t2.op_type == "Transpose" else None
        t1 = producer.get(r.input[0]) if r is not None and r.op_type == "Reshape" else None
        if t1 is None or t1.op_type != "Transpose" or readers.get(r.output[0]) != 1 or readers.get(
                t1.output[0]) != 1 or t1.input[0] not in shapes:
            continue
        s2 = const_of(r.input[1])
        x_shape = shapes[t1.input[0]]
        if s2 is None or any(not isinstance(d, int) or d < 1 for d in [*x_shape, *s2]):
            continue
        if math.prod(x_shape) != math.prod(s2):
            continue
        joined = _joined(list(x_shape), _perm(t1), list(s2), _perm(t2))
        if joined is None:
            continue
        shape, perm = joined
        reshape = make_node("Reshape", [t1.input[0], new_const(shape)], [r.output[0]])
        transpose = make_node("Transpose", [r.output[0]], list(t2.output), perm=perm)
        at = nodes.index(t2)
        nodes[at:at + 1] = [reshape, transpose]
        nodes.remove(t1)
        nodes.remove(r)
        changed = True
    return changed


def _perm(node) -> list[int]:
    return list(proto.get_attribute_value(node.attribute[0]))


def join_in_model(model, arrays, fresh) -> None:
    """`join` over a written model (its separate weights `arrays` given for the shapes; new
    constants named by `fresh()`), unread initializers dropped after."""
    if not any(n.op_type == "Transpose" for n in model.graph.node):
        return
    try:
        shapes = value_shapes(model, arrays)
    except Exception:  # onnx's inference errors have no common exported type
        return
    graph = model.graph
    consts = {t.name: t for t in graph.initializer}

    def const_of(name):
        t = consts.get(name)
        return None if t is None or len(t.dims) != 1 else ndarrays.to_array(t).tolist()

    def new_const(ints):
        tensor = ndarrays.from_array(np.asarray(ints, dtype=np.int64), fresh())
        graph.initializer.append(tensor)
        return tensor.name

    nodes = list(graph.node)
    if join(nodes, shapes, const_of, proto.make_node, new_const):
        del graph.node[:]
        graph.node.extend(nodes)
        read = {x for n in nodes for x in n.input} | {o.name for o in graph.output}
        kept = [t for t in graph.initializer if t.name in read]
        del graph.initializer[:]
        graph.initializer.extend(kept)
