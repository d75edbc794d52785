"""A written Reshape that only inserts or only removes dimensions of length 1 is written as the
`Unsqueeze` or `Squeeze` it is: the exporter lays out every view as a Reshape, and the ops
models use for these two (torch's exporters, ONNX's function bodies) come back as themselves.
A Reshape written back for a model's own Reshape or Flatten (`layout.KEPT_RESHAPE`) stays a
Reshape. One node for one node; run last, after the passes that join Reshapes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ngrules.interop.onnx.downgrade import AS_READ
from ngrules.interop.onnx.layout import KEPT_RESHAPE
from ngrules.interop.onnx.written import attribute


def name_in_model(model, arrays: Mapping[str, np.ndarray], fresh) -> None:
    """Rewrite each such Reshape in place (its target read from a small initializer)."""
    from onnx import numpy_helper

    graph = model.graph
    kept = set()
    for node in graph.node:
        if node.doc_string == KEPT_RESHAPE:  # a model's own Reshape: stays one
            node.doc_string = ""
            kept.add(id(node))
    targets = {t.name: t for t in graph.initializer}
    candidates = [n for n in graph.node if n.op_type == "Reshape" and n.input[1] in targets
                  and n.doc_string != AS_READ  # a model's own Reshape, written as read
                  and id(n) not in kept
                  and not attribute(n, "allowzero")]
    if not candidates:
        return
    from ngrules.interop.onnx.inferred import value_shapes

    try:
        shapes = value_shapes(model, arrays)
    except Exception:  # noqa: BLE001  (a node written as read at an older opset): as they are
        return
    for node in candidates:
        before = shapes.get(node.input[0])
        after = [int(v) for v in numpy_helper.to_array(targets[node.input[1]]).ravel()]
        if before is None or not all(isinstance(d, int) and d > 0 for d in before):
            continue
        if any(v <= 0 for v in after):
            continue
        found = _unit_change(list(before), after)
        if found is None:
            continue
        op, axes = found
        name = fresh()
        graph.initializer.append(numpy_helper.from_array(np.asarray(axes, np.int64), name))
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
