"""A graph evaluated on tensors of z3 terms: numpy object arrays of `Sym`, one per element.

Views (the `view` trait), Slice, Concat, Dot and DotLowDimension run their own numpy kernels on
the object arrays (they only move, add and multiply elements); Sum, Prod, Max and Min are
unrolled here (Max and Min with z3's If); elementwise ops map their scalar encoding
(`scalars.ENCODINGS`) over the elements. This unrolls every tensor op of a concrete instance
into scalar terms.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import z3

from ngrules.ir.graph import Node, toposort
from ngrules.ir.ops import OPS
from ngrules.verification.prove.scalars import ENCODINGS, Sym

#: Ops whose numpy kernel works on object arrays unchanged (it adds, multiplies or moves).
OBJECT_KERNELS = frozenset({"Dot", "DotLowDimension", "Slice", "Concat"})
#: Reductions, unrolled here (their kernels may ask numpy for a float accumulator).
_REDUCTIONS = {
    "Sum": lambda a, b: a + b,
    "Prod": lambda a, b: a * b,
    "Max": lambda a, b: _pick(a, b, True),
    "Min": lambda a, b: _pick(a, b, False),
}


class NoEncoding(Exception):
    """An op of the instance has no encoding; the message names it and says why."""


def _pick(a: Sym, b: Sym, biggest: bool) -> Sym:
    cond = a.v >= b.v if biggest else a.v <= b.v
    return Sym(z3.If(cond, a.v, b.v), z3.And(a.ok, b.ok))


def encodable(op: str) -> bool:
    """Whether instances with this op can be unrolled into z3 terms."""
    d = OPS.get(op)
    if d is None:
        return False
    if d.has("leaf"):
        return op in ("Placeholder", "Variable", "Constant")  # a variable holds any value
    return op in ENCODINGS or op in OBJECT_KERNELS or op in _REDUCTIONS or d.has("view")


def missing_reason(op: str) -> str:
    d = OPS[op]
    if d.has("multi_output") or op == "Output":
        return f"{op} is a multi-output fused kernel with no scalar encoding"
    if d.has("leaf"):
        return f"{op} is a leaf whose value is not an input"
    return f"{op} has no encoding in ngrules.verification.prove"


def _reduce(node: Node, x: np.ndarray) -> np.ndarray:
    src = node.args[0]
    where = [src.axes.index(a) for a in node.attrs["reduction_axes"]]
    keep = [i for i in range(x.ndim) if i not in where]
    moved = x.transpose(keep + where).reshape(node.axes.lengths + (-1,))
    out = np.empty(moved.shape[:-1], dtype=object)
    step = _REDUCTIONS[node.op]
    for idx in np.ndindex(out.shape):
        out[idx] = functools.reduce(step, list(moved[idx]))
    return out


def _elementwise(node: Node, args: list[np.ndarray]) -> np.ndarray:
    enc = ENCODINGS[node.op]
    out = np.empty(node.axes.lengths, dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = enc(*(Sym.of(a[idx]) for a in args), node.attrs)
    return out


def _leaf(node: Node, inputs: dict[Node, np.ndarray]) -> np.ndarray:
    if node.op == "Constant":
        value = np.asarray(node.attrs["value"], np.float64)
        out = np.empty(value.shape, dtype=object)
        for idx in np.ndindex(value.shape):
            out[idx] = Sym.of(value[idx])
        return out
    if node not in inputs:
        out = np.empty(node.axes.lengths, dtype=object)
        for idx in np.ndindex(out.shape):
            suffix = "_".join(map(str, idx))
            out[idx] = Sym(z3.Real(f"{node.name}[{suffix}]"))
        inputs[node] = out
    return inputs[node]


def evaluate(outputs: Sequence[Node], inputs: dict[Node, np.ndarray]) -> list[np.ndarray]:
    """The outputs as object arrays of Sym; placeholders become z3 reals (kept in inputs, so
    two graphs evaluated with one `inputs` share their variables)."""
    values: dict[Node, np.ndarray] = {}
    for node in toposort(outputs):
        if not encodable(node.op):
            raise NoEncoding(missing_reason(node.op))
        if OPS[node.op].has("leaf"):
            values[node] = _leaf(node, inputs)
            continue
        args = [values[a] for a in node.args]
        if node.op in ENCODINGS:
            values[node] = _elementwise(node, args)
        elif node.op in _REDUCTIONS:
            values[node] = _reduce(node, args[0])
        else:
            result = OPS[node.op].kernel(node)(*args)
            values[node] = np.asarray(result, dtype=object).reshape(node.axes.lengths)
    return [values[o] for o in outputs]
