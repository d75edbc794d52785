"""The exporter's last pass: outputs named in place, and nothing kept that no output reads.

Slices that together cut one value along one axis into consecutive pieces become one Split (as
a model's Split came in). A recognised form (a Gemm's bias, a BatchNormalization) can leave
nodes written before it was recognised with no reader; they are dropped here, with unread
initializers, after a Reshape of a Reshape has become one Reshape. Each output is the node
computing it renamed, not an extra Identity, unless it is a graph input, an initializer or
already another output."""

from __future__ import annotations

from collections.abc import Sequence


def finish(em, results: Sequence[str], names: Sequence[str]) -> None:
    """Name the results `names` and drop the nodes and initializers they do not need."""
    _split_once(em)
    produced = {out: node for node in em.nodes for out in node.output}
    renames: dict[str, str] = {}
    for result, name in zip(results, names):
        if result in produced and result not in renames and result not in names:
            renames[result] = name
        else:
            em.nodes.append(em.helper.make_node("Identity", [renames.get(result, result)], [name]))
    for node in em.nodes:
        for i, x in enumerate(node.input):
            if x in renames:
                node.input[i] = renames[x]
        for i, x in enumerate(node.output):
            if x in renames:
                node.output[i] = renames[x]
    _reshape_once(em)
    _prune(em, set(names))


_RESHAPES = ("Reshape", "Flatten")


def _split_once(em) -> None:
    """The Slices of one value along one axis whose ranges tile the axis: one Split, where the
    first of them was, its outputs named as theirs."""
    groups: dict[tuple[str, int], list] = {}
    for out, (source, axis, start, stop, length) in em.parts_of_axis.items():
        groups.setdefault((source, axis), []).append((start, min(stop, length), length, out))
    slices = {node.output[0]: node for node in em.nodes if node.op_type == "Slice"}
    for (source, axis), parts in groups.items():
        parts.sort()
        ends = [0] + [stop for _, stop, _, _ in parts]
        if (len(parts) < 2 or ends[-1] != parts[0][2] or any(out not in slices for *_, out in parts)
                or [start for start, *_ in parts] != ends[:-1]):
            continue
        sizes = em.const([stop - start for start, stop, _, _ in parts])
        split = em.helper.make_node("Split", [source, sizes], [out for *_, out in parts],
                                    axis=axis)
        doomed = {id(slices[out]) for *_, out in parts}
        first = min(em.nodes.index(slices[out]) for *_, out in parts)
        em.nodes[first] = split
        em.nodes[:] = [node for node in em.nodes if id(node) not in doomed]


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
