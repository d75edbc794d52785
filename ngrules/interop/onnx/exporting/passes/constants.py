"""Two constants added (or multiplied) in a row written as one: `(x + c1) + c2` is
`x + (c1 + c2)`.

A BERT's embeddings are the token embedding plus a token-type embedding the importer folded to
a constant plus the position embedding: two Adds of constants, one Add once the constants are
summed. The inner node must be read by nothing else and the summed constant may not be larger
than the two together (broadcasting could blow it up). Only the model's own initializers are
summed (weights kept apart, `weights.separable`, are large and never such terms).
"""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx import ndarrays

_JOINABLE = {"Add": np.add, "Mul": np.multiply}


def _constant_operand(node, consts) -> tuple[str, str] | None:
    """(the other operand, the constant) of a binary node with one initializer operand."""
    a, b = node.input
    if b in consts and a not in consts:
        return a, b
    if a in consts and b not in consts:
        return b, a
    return None


def join_in_model(model, fresh) -> None:
    """Join the model's chains of two constant Adds or Muls (in place); new constants are
    named by `fresh()`."""
    graph = model.graph
    consts = {t.name: t for t in graph.initializer}
    producer = {y: n for n in graph.node for y in n.output}
    readers: dict[str, int] = {o.name: 1 for o in graph.output}
    for n in graph.node:
        for x in n.input:
            readers[x] = readers.get(x, 0) + 1
    gone: set[int] = set()
    for outer in graph.node:
        op = outer.op_type
        pair = _constant_operand(outer, consts) if op in _JOINABLE and not outer.domain else None
        inner = producer.get(pair[0]) if pair else None
        if inner is None or inner.op_type != op or inner.domain or readers.get(pair[0]) != 1:
            continue
        inner_pair = _constant_operand(inner, consts)
        if inner_pair is None or id(inner) in gone:
            continue
        c1, c2 = (ndarrays.to_array(consts[c]) for c in (inner_pair[1], pair[1]))
        if c1.dtype != c2.dtype:
            continue
        total = _JOINABLE[op](c1, c2).astype(c1.dtype)
        if total.size > c1.size + c2.size:
            continue
        tensor = ndarrays.from_array(total, fresh())
        graph.initializer.append(tensor)
        consts[tensor.name] = tensor
        outer.input[:] = [inner_pair[0], tensor.name]
        gone.add(id(inner))
    if gone:
        kept = [n for n in graph.node if id(n) not in gone]
        del graph.node[:]
        graph.node.extend(kept)
        read = {x for n in kept for x in n.input}
        initializers = [t for t in graph.initializer if t.name in read]
        del graph.initializer[:]
        graph.initializer.extend(initializers)
