"""GELU written out in elementwise nodes, written as one node.

Exporters write GELU in many association orders (`x * 0.5 * (1 + erf(x / √2))`, `(x * (erf(x /
√2) + 1)) * 0.5`, `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))` with `Pow` or products, ...).
Rather than list them, a chain is taken as GELU when it is a small subgraph of elementwise
nodes (Add, Sub, Mul, Div, Pow, Erf, Tanh) over one input and scalar constants, its inner values
read by nothing else, that computes GELU (erf or tanh form) on 201 points of [-6, 6] within
1e-5. Such a chain becomes one node: ONNX's `Gelu` from opset 20 (with `approximate`), the
`ngrules` domain's `Gelu` or `GeluTanh` function before (which onnxruntime inlines, and joins
again into its Gelu kernel for the erf form); the onnxruntime target then writes them as its
Gelu, FastGelu or BiasGelu (`ort_target`).
"""

from __future__ import annotations

import math

import numpy as np

from ngrules.interop.onnx import ndarrays, proto
from ngrules.interop.onnx.written import WrittenGraph, read, replace

_ELEMENTWISE = ("Add", "Sub", "Mul", "Div", "Pow", "Erf", "Tanh")
_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
           "Pow": np.power}
_LIMIT = 16  # nodes in one chain (the tanh form with products has 10)
_POINTS = np.linspace(-6.0, 6.0, 201)
_ERF = np.vectorize(math.erf)


def _gelu_erf(x):
    return 0.5 * x * (1 + _ERF(x / math.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def scalar_constants(model) -> dict[str, float]:
    """The model's one-element constants (initializers and Constant nodes) as floats."""
    out = {}
    for t in model.graph.initializer:
        if math.prod(t.dims) == 1:
            out[t.name] = float(ndarrays.to_array(t).reshape(()))
    for n in model.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            t = n.attribute[0].t
            if math.prod(t.dims) == 1:
                out[n.output[0]] = float(ndarrays.to_array(t).reshape(()))
    return out


def _chain(g, end: str, x: str, scalars: dict[str, float]) -> list | None:
    """The elementwise nodes computing `end` from `x` and scalar constants, or None."""
    nodes, todo, seen = [], [end], set()
    while todo:
        value = todo.pop()
        if value == x or value in scalars or value in seen:
            continue
        seen.add(value)
        node = g.producer.get(value)
        if node is None or node.op_type not in _ELEMENTWISE or node.domain not in ("", "ai.onnx"):
            return None
        nodes.append(node)
        if len(nodes) > _LIMIT:
            return None
        todo.extend(node.input)
    inner = {y for n in nodes for y in n.output} - {end}
    members = {id(n) for n in nodes}
    if any(v in g.outputs or any(id(r) not in members for r in g.readers(v)) for v in inner):
        return None
    return sorted(nodes, key=g.position)


def _evaluate(chain: list, x: str, scalars: dict[str, float]) -> np.ndarray:
    values = {x: _POINTS}
    with np.errstate(all="ignore"):
        for node in chain:
            args = [values[i] if i in values else scalars[i] for i in node.input]
            if node.op_type == "Erf":
                values[node.output[0]] = _ERF(args[0])
            elif node.op_type == "Tanh":
                values[node.output[0]] = np.tanh(args[0])
            else:
                values[node.output[0]] = _BINARY[node.op_type](*args)
    return np.broadcast_to(values[chain[-1].output[0]], _POINTS.shape)


def _form(chain: list, x: str, scalars) -> str | None:
    """'none' or 'tanh' (Gelu's `approximate`) when the chain computes that GELU."""
    got = _evaluate(chain, x, scalars)
    for form, want in (("none", _gelu_erf(_POINTS)), ("tanh", _gelu_tanh(_POINTS))):
        if np.allclose(got, want, rtol=1e-5, atol=1e-5):
            return form
    return None


def _ends(g, squash) -> list:
    """The values after Erf/Tanh, up to four elementwise readers on (the last first)."""
    ends, node = [], squash
    for _ in range(4):
        node = g.only_reader(node.output[0])
        if node is None or node.op_type not in ("Add", "Sub", "Mul", "Div"):
            break
        ends.append(node)
    return ends[::-1]


def _candidates(g, squash, scalars) -> list[str]:
    """Values a chain through `squash` may start from: the non-constant inputs of the nodes
    at most a few steps before it."""
    out, todo = [], [(squash, 0)]
    while todo:
        node, depth = todo.pop()
        for value in node.input:
            if value in scalars or value in out:
                continue
            out.append(value)
            producer = g.producer.get(value)
            if producer is not None and depth < 5 and producer.op_type in _ELEMENTWISE:
                todo.append((producer, depth + 1))
    return out


def find(g, squash, scalars) -> tuple[list, str, str] | None:
    """(the chain, its input, 'none' or 'tanh') of a GELU through this Erf or Tanh node."""
    for end in _ends(g, squash):
        for x in _candidates(g, squash, scalars):
            chain = _chain(g, end.output[0], x, scalars)
            if chain and any(n is squash for n in chain):
                form = _form(chain, x, scalars)
                if form is not None:
                    return chain, x, form
    return None


def join_in_model(model, opset: int) -> None:
    """Each GELU chain of the model's graph as one node (in place)."""

    from ngrules.interop.onnx.exporting.functions import DOMAIN, FUNCTIONS

    if not any(n.op_type in ("Erf", "Tanh") for n in model.graph.node):
        return
    scalars = scalar_constants(model)
    g = WrittenGraph(list(model.graph.node), {o.name for o in model.graph.output}, {}, {})
    called: set[str] = set()
    for node in list(g.nodes):
        if id(node) in g.dropped or node.op_type not in ("Erf", "Tanh") or node.domain:
            continue
        found = find(g, node, scalars)
        if found is None:
            continue
        chain, x, form = found
        y = chain[-1].output[0]
        if opset >= 20:
            gelu = proto.make_node("Gelu", [x], [y], approximate=form)
        else:
            name = "GeluTanh" if form == "tanh" else "Gelu"
            gelu = proto.make_node(name, [x], [y], domain=DOMAIN)
            called.add(name)
        replace(g, chain, gelu, at=chain[-1])
    if not g.dropped:
        return
    nodes = read(g, [n for n in g.nodes if id(n) not in g.dropped])
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    have = {(f.domain, f.name) for f in model.functions}
    model.functions.extend(FUNCTIONS[f](opset) for f in sorted(called) if (DOMAIN, f) not in have)
    if called and DOMAIN not in {o.domain for o in model.opset_import}:
        model.opset_import.append(proto.make_opsetid(DOMAIN, 1))
    used = {x for n in nodes for x in n.input}
    kept = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
