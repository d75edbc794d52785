"""The exporter's last pass: outputs named in place, and nothing kept that no output reads.

A recognised form (a Gemm's bias, a BatchNormalization) can leave nodes written before it was
recognised with no reader; they are dropped here, with unread initializers, after a Reshape of
a Reshape has become one Reshape. Each output is the
node computing it renamed, not an extra Identity, unless it is a graph input, an initializer or
already another output.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ngrules.interop.onnx import proto
from ngrules.ir.symbolic import symbols_of


def finish(em, results: Sequence[str], names: Sequence[str],
           written: Collection[str] = ()) -> dict[str, str]:
    """Name the results `names` and drop the nodes and initializers they do not need (the
    `written` names are already made by their own nodes: `origins`); the values renamed."""
    _slices_as_split(em)  # before renaming: slices are known by the names they were written as
    produced = {out: node for node in em.nodes for out in node.output}
    renames: dict[str, str] = {}
    for result, name in zip(results, names):
        if name in written:
            continue
        if result in produced and result not in renames and result not in names:
            renames[result] = name
        else:
            em.nodes.append(proto.make_node("Identity", [renames.get(result, result)], [name]))
    for node in em.nodes:
        for i, x in enumerate(node.input):
            if x in renames:
                node.input[i] = renames[x]
        for i, x in enumerate(node.output):
            if x in renames:
                node.output[i] = renames[x]
    _reshape_once(em)
    _prune(em, set(names))
    return renames


_RESHAPES = ("Reshape", "Flatten")


def _reshape_once(em) -> None:
    """A Reshape of a Reshape (or Flatten) reads the first one's input: the data's order is
    the same, the target shape is written out in full (no 0 or -1)."""
    producer = {out: node for node in em.nodes for out in node.output}
    for node in em.nodes:
        if node.op_type != "Reshape":
            continue
        inner = producer.get(node.input[0])
        while inner is not None and inner.op_type in _RESHAPES:
            node.input[0] = inner.input[0]
            inner = producer.get(node.input[0])


def _slices_as_split(em) -> None:
    """Two or more Slices of one value along one axis, not overlapping, are one Split (a part
    no Slice took is an output nothing reads): how exporters write a fused QKV projection."""
    groups: dict[tuple, list] = {}
    for node in em.nodes:
        out = node.output[0] if node.op_type == "Slice" else None
        if out in em.slice_extent:
            source, (starts, stops, axes, _) = em.slices[out]
            extent = em.slice_extent[out]
            piece = (min(starts[0], extent), min(stops[0], extent))
            groups.setdefault((source, axes[0], extent), []).append((piece, node))
    for (source, axis, extent), pieces in groups.items():
        pieces.sort(key=lambda p: p[0])
        spans = [span for span, _ in pieces]
        if len(pieces) < 2 or any(a[1] > b[0] for a, b in zip(spans, spans[1:])):
            continue
        sizes, outputs, at = [], [], 0
        for (start, stop), node in pieces:
            if start > at:  # a gap: a part nothing reads
                sizes.append(start - at)
                outputs.append(em.fresh("unread"))
            sizes.append(stop - start)
            outputs.append(node.output[0])
            at = stop
        if at < extent:
            sizes.append(extent - at)
            outputs.append(em.fresh("unread"))
        if any(size <= 0 for size in sizes) or symbols_of(tuple(sizes)):
            continue  # (a symbolic length is computed at run time: Slices keep it so)
        split = proto.make_node("Split", [source, em.const(sizes)], outputs, axis=axis)
        first = min(em.nodes.index(node) for _, node in pieces)
        gone = {id(node) for _, node in pieces}
        em.nodes[first] = split
        em.nodes[:] = [n for n in em.nodes if id(n) not in gone]


def _prune(em, needed: set[str]) -> None:
    kept = []
    for node in reversed(em.nodes):
        if any(out in needed for out in node.output):
            kept.append(node)
            needed.update(x for x in node.input if x)
    em.nodes[:] = kept[::-1]
    em.inits[:] = [t for t in em.inits if t.name in needed]
    for name in [w for w in em.weights or () if w not in needed]:
        del em.weights[name]
