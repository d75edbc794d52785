"""A graph evaluated on tensors of z3 terms: numpy object arrays of `Sym`, one per element.

Views (the `view` trait), Slice, TensorSlice, Concat, Dot and DotLowDimension run their own numpy
kernels on the object arrays (they only move, add and multiply elements); Sum, Prod, Max and Min are
unrolled here (Max and Min with z3's If); elementwise ops map their scalar encoding
(`scalars.ENCODINGS`) over the elements. This unrolls every tensor op of a concrete instance
into scalar terms.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import z3

from ngrules.ir import declared
from ngrules.ir.graph import Node, toposort
from ngrules.ir.ops import OPS
from ngrules.verification.prove.scalars import ENCODINGS, Sym
from ngrules.verification.prove.tensor_ops import TENSOR_OPS, grouped, pick, through_body

#: Ops whose numpy kernel works on object arrays unchanged (it adds, multiplies or moves).
OBJECT_KERNELS = frozenset({"Dot", "DotLowDimension", "Slice", "TensorSlice", "Concat"})
#: Reductions, unrolled here (their kernels may ask numpy for a float accumulator).
_REDUCTIONS = {
    "Sum": lambda a, b: a + b,
    "Prod": lambda a, b: a * b,
    "Max": lambda a, b: pick(a, b, True),
    "Min": lambda a, b: pick(a, b, False),
}


class NoEncoding(Exception):
    """An op of the instance has no encoding; the message names it and says why."""


def encodable(op: str) -> bool:
    """Whether instances with this op can be unrolled into z3 terms."""
    d = OPS.get(op)
    if d is None:
        return False
    if d.has("leaf"):
        return op in ("Placeholder", "Variable", "Constant")  # a variable holds any value
    if op in declared.DECLARATIONS or op == "Output":  # a declaration is its own encoding
        return True
    return (op in ENCODINGS or op in OBJECT_KERNELS or op in _REDUCTIONS or op in TENSOR_OPS
            or d.has("view"))


def missing_reason(op: str) -> str:
    d = OPS[op]
    if d.has("multi_output"):
        return f"{op} is a multi-output fused kernel with no scalar encoding"
    if d.has("leaf"):
        return f"{op} is a leaf whose value is not an input"
    return f"{op} has no encoding in ngrules.verification.prove"


def _reduce(node: Node, x: np.ndarray) -> np.ndarray:
    moved, _ = grouped(node, x, node.attrs["reduction_axes"], False)
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
        names = node.axes.names
        for idx in np.ndindex(out.shape):
            name = f"{node.name}[{_element(names, idx)}]"
            out[idx] = Sym(z3.If(z3.Bool(name), z3.RealVal(1), z3.RealVal(0))
                           if node.dtype.kind == "b" else z3.Real(name))  # a bool: 0 or 1
        inputs[node] = out
    return inputs[node]


def _element(names, idx) -> str:
    """An element named by its position on each axis, axes by name (`b=1,a=0` as `a=0,b=1`):
    the same element in every layout of the input is the same variable, so claims that
    layouts share are the same terms (decided once, `prover`)."""
    return ",".join(f"{n}={i}" for n, i in sorted(zip(names, idx)))


#: Ops whose result may be an integer or bool tensor: they compare, pick a position, cast, or
#: move values. Arithmetic in integers wraps around and divides by truncation, which the
#: reals do not: such instances have no encoding.
_INTEGER_SAFE = frozenset({"Constant", "Greater", "Less", "GreaterEqual", "LessEqual", "Equal",
                           "NotEqual", "Argmax", "Argmin", "Cast", "Select", "Where", "Slice",
                           "TensorSlice", "Concat", "Pad", "Output"})


#: Logic ops, encoded on bools (0 or 1) only: on integers they are bitwise.
LOGIC = frozenset({"And", "Or", "Xor", "Not"})


def _refused(node: Node) -> str | None:
    """Why a node of an encodable op still has no encoding, if it has none."""
    if node.op in ("Placeholder", "Variable") and node.dtype.kind not in "fb":
        return f"{node.op} {node.name!r} holds {node.dtype} values (integer arithmetic wraps)"
    if node.dtype is not None and node.dtype.kind != "f" and node.op not in _INTEGER_SAFE \
            and not OPS[node.op].has("view") \
            and not (node.dtype.kind == "b" and (node.op in LOGIC or OPS[node.op].has("leaf"))):
        return f"{node.op} computes in {node.dtype}, which wraps and truncates unlike the reals"
    if node.op == "Cast" and node.dtype.kind == "f" and node.args[0].dtype.kind == "f" \
            and node.dtype.itemsize < node.args[0].dtype.itemsize:
        return f"Cast from {node.args[0].dtype} to {node.dtype} rounds; the reals cannot say how"
    return None


def evaluate(outputs: Sequence[Node], inputs: dict[Node, np.ndarray],
             seeded: dict[Node, np.ndarray] | None = None) -> list[np.ndarray]:
    """The outputs as object arrays of Sym; placeholders become z3 reals (kept in inputs, so
    two graphs evaluated with one `inputs` share their variables), except those `seeded` with
    terms already (a declared op's stand-ins)."""
    values: dict[Node, np.ndarray] = dict(seeded or {})
    for node in toposort(outputs):
        if node in values:
            continue
        if not encodable(node.op):
            raise NoEncoding(missing_reason(node.op))
        why = _refused(node)
        if why is not None:
            raise NoEncoding(why)
        values[node] = _value(node, values, inputs)
    return [values[o] for o in outputs]


def _value(node: Node, values: dict, inputs: dict[Node, np.ndarray]):
    if OPS[node.op].has("leaf"):
        return _leaf(node, inputs)
    args = [values[a] for a in node.args]
    if node.op == "Output":
        return args[0][node.attrs["index"]]
    if node.op in declared.DECLARATIONS:
        return through_body(node, args, lambda outs, seeded: evaluate(outs, inputs, seeded))
    if node.op in ENCODINGS:
        return _elementwise(node, args)
    if node.op in _REDUCTIONS:
        return _reduce(node, args[0])
    if node.op in TENSOR_OPS:
        return TENSOR_OPS[node.op](node, *args)
    result = OPS[node.op].kernel(node)(*args)
    return np.asarray(result, dtype=object).reshape(node.axes.lengths)
