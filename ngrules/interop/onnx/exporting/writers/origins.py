"""A graph output the importer folded to a constant (a HannWindow over a fixed size, the Shape
of an input, a Constant) written back as the ONNX node that made it, not as an Identity of an
initializer: the round trip with no rule keeps the model's own node.

The importer records, on the output's Constant node, the node that computed it and what each of
its inputs was (a graph input, or a constant); the exporter writes that node again when the
output is still that same Constant node (no rule replaced it) and the opset is the one read.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ngrules.interop.onnx import proto
from ngrules.ir.graph import Node


@dataclass(frozen=True)
class Origin:
    """The ONNX node (serialised) computing a folded output, its inputs (a placeholder node, a
    constant array, or None for an omitted input) and the opset it was read at."""

    spec: bytes
    inputs: tuple
    opset: int


#: an output's Constant node -> the node it was folded from.
_ORIGINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def record(importer, names: Sequence[str], outputs: Sequence[Node], opset: int | None) -> None:
    """Remember, for each output folded to a Constant, the single-output node that made it
    when each of that node's inputs is a graph input or a constant."""
    producers = importer._producers()
    for name, out in zip(names, outputs):
        node = producers.get(name)
        if (out.op != "Constant" or node is None or opset is None or len(node.output) != 1
                or name in importer.folding.symbolic):
            continue
        inputs = []
        for x in node.input:
            if not x:
                inputs.append(None)
            elif x in importer.placeholders:
                inputs.append(importer.placeholders[x])
            elif x in importer.consts:
                inputs.append(np.asarray(importer.consts[x]))
            else:
                break  # computed in the graph: not written back
        else:
            _ORIGINS[out] = Origin(node.SerializeToString(), tuple(inputs), opset)


def write_back(em, outputs: Sequence[Node], names: Sequence[str], opset: int) -> set[str]:
    """Write each recorded output's node, its output named as the graph output; the names
    written (`finish` leaves them as they are)."""

    from ngrules.interop.onnx.exporting.passes.downgrade import AS_READ
    from ngrules.interop.onnx.exporting.writers.positional import elem_type

    written: set[str] = set()
    declared = {vi.name for vi in em.inputs}
    for out, name in zip(outputs, names):
        origin = _ORIGINS.get(out)
        if origin is None or origin.opset != opset or name in written:
            continue
        node = proto.NodeProto()
        node.ParseFromString(origin.spec)
        for i, x in enumerate(origin.inputs):
            if isinstance(x, Node):
                node.input[i] = x.attrs["name"]
                if node.input[i] not in declared:
                    declared.add(node.input[i])
                    em.inputs.append(proto.make_tensor_value_info(
                        node.input[i], elem_type(x.dtype), x.axes.lengths))
            elif x is not None:
                node.input[i] = em.fresh("c")
                em.initializer(x, node.input[i])
        node.output[0] = name
        node.name = ""
        node.doc_string = AS_READ  # in the opset's own form: `downgrade` leaves it
        em.nodes.append(node)
        written.add(name)
    return written
