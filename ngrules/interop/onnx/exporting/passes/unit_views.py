"""A written Reshape that only inserts or only removes dimensions of length 1 is written as the
`Unsqueeze` or `Squeeze` it is: the exporter lays out every view as a Reshape, and the ops
models use for these two (torch's exporters, ONNX's function bodies) come back as themselves.
A Reshape written back for a model's own Reshape (`layout.KEPT_RESHAPE`) stays a Reshape; one
written back for a model's Flatten (`layout.KEPT_FLATTEN`) is that Flatten where its input's
shape and its 2-D target give one (a Flatten with axis 0 is a Reshape to (1, n) to the
layout). One node for one node; run last, after the passes that join Reshapes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ngrules.interop.onnx import ndarrays, proto
from ngrules.interop.onnx.exporting.layout import KEPT_FLATTEN, KEPT_RESHAPE
from ngrules.interop.onnx.exporting.passes.downgrade import AS_READ
from ngrules.interop.onnx.written import attribute


def name_in_model(model, arrays: Mapping[str, np.ndarray], fresh) -> None:
    """Rewrite each such Reshape in place (its target read from a small initializer)."""
    graph = model.graph
    kept, flattens = {}, []  # (the nodes held: an id is a protobuf wrapper's, while it lives)
    for node in graph.node:
        if node.doc_string in (KEPT_RESHAPE, KEPT_FLATTEN):  # a model's own: stays one
            if node.doc_string == KEPT_FLATTEN:
                flattens.append(node)
            node.doc_string = ""
            kept[id(node)] = node
    targets = {t.name: t for t in graph.initializer}
    candidates = [n for n in graph.node if n.op_type == "Reshape" and n.input[1] in targets
                  and n.doc_string != AS_READ  # a model's own Reshape, written as read
                  and id(n) not in kept
                  and not attribute(n, "allowzero")]
    flattens = [n for n in flattens if n.op_type == "Reshape" and n.input[1] in targets]
    if not candidates and not flattens:
        return
    from ngrules.interop.onnx.exporting.passes.inferred import value_shapes

    try:
        shapes = value_shapes(model, arrays)
    except Exception:  # noqa: BLE001  (a node written as read at an older opset): as they are
        return
    for node in flattens:
        target = node.input[1]
        _as_flatten(node, shapes.get(node.input[0]), ndarrays.to_array(targets[target]))
        if not any(target in n.input for n in graph.node) and target not in (
                o.name for o in graph.output):
            graph.initializer.remove(targets[target])  # its target: read by nothing now
    for node in candidates:
        before = shapes.get(node.input[0])
        after = [int(v) for v in ndarrays.to_array(targets[node.input[1]]).ravel()]
        if before is None or not all(isinstance(d, int) and d > 0 for d in before):
            continue
        if any(v <= 0 for v in after):
            continue
        found = _unit_change(list(before), after)
        if found is None:
            continue
        op, axes = found
        name = fresh()
        graph.initializer.append(ndarrays.from_array(np.asarray(axes, np.int64), name))
        node.op_type = op
        node.input[1] = name
        del node.attribute[:]  # a Reshape's allowzero=0


def _unit_change(before: Sequence[int], after: Sequence[int]):
    """('Unsqueeze', positions in `after` of the inserted 1s) or ('Squeeze', positions in
    `before` of the removed 1s), or None when the reshape is neither."""
    if len(after) > len(before):
        inserted = _extra_ones(before, after)
        return None if inserted is None else ("Unsqueeze", inserted)
    if len(after) < len(before):
        removed = _extra_ones(after, before)
        return None if removed is None else ("Squeeze", removed)
    return None


def _extra_ones(short: Sequence[int], long: Sequence[int]) -> list[int] | None:
    """The positions in `long` of 1s that, left out, give `short`; None when there are none."""
    extra, i = [], 0
    for j, d in enumerate(long):
        if i < len(short) and d == short[i]:  # 1s are interchangeable: matching one is safe
            i += 1
        elif d == 1:
            extra.append(j)
        else:
            return None
    return extra if i == len(short) else None


def _as_flatten(node, before, target) -> None:
    """The Reshape written as the Flatten it is, when `before` (its input's shape) flattened
    at some axis is the 2-D `target`."""
    after = [int(v) for v in np.ravel(target)]
    if before is None or len(after) != 2 or not all(isinstance(d, int) and d > 0 for d in before):
        return
    for k in range(len(before) + 1):
        if [int(np.prod(before[:k])), int(np.prod(before[k:]))] == after:
            node.op_type = "Flatten"
            del node.input[1:]
            del node.attribute[:]
            node.attribute.append(proto.make_attribute("axis", k))
            return
