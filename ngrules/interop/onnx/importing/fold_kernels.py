"""numpy kernels for the ops that shape computations fold most (issue 34, item 6).

A model exported by torch's legacy exporter computes its shapes in the graph (Gather of a
Shape, Unsqueeze, Concat, Mul, Where, Cast...); folding them at import with onnx's reference
evaluator imports the whole onnx package and its evaluator (1.3 s) for a handful of nodes. These
kernels compute what the evaluator computes for those ops, in numpy, for the default domain and
numpy's element types; anything else (another op, mixed dtypes, an old opset's attribute form,
strings) returns None and goes to the evaluator as before.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ngrules.interop.onnx import ndarrays, proto


def _one_type(a: np.ndarray, b: np.ndarray) -> bool:
    """Both of one numeric (or bool) type: mixed types and strings go to the evaluator."""
    return a.dtype == b.dtype and a.dtype != object


def _same_type(fn: Callable) -> Callable:
    """A binary op of two tensors of one numeric (or bool) type, its result of that type."""
    def run(args, attrs):
        a, b = args
        if not _one_type(a, b):
            return None
        out = np.asarray(fn(a, b))
        return out if out.dtype == a.dtype else None
    return run


def _compare(fn: Callable) -> Callable:
    def run(args, attrs):
        a, b = args
        return np.asarray(fn(a, b)) if _one_type(a, b) else None
    return run


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ONNX's Div: integers truncated toward zero (C's), floats divided."""
    if not np.issubdtype(a.dtype, np.integer):
        return np.divide(a, b)
    with np.errstate(divide="ignore"):
        q, r = np.floor_divide(a, b), np.remainder(a, b)
    return q + ((r != 0) & ((a < 0) ^ (b < 0))).astype(q.dtype)


def _mod(args, attrs):
    a, b = args
    if not _one_type(a, b):
        return None
    return np.asarray((np.fmod if attrs.get("fmod", 0) == 1 else np.mod)(a, b))


def _where(args, attrs):
    cond, x, y = args
    if not _one_type(x, y):
        return None
    return np.where(cond, x, y).astype(x.dtype)


def _cast(args, attrs):
    (x,) = args
    to = attrs.get("to")
    if to not in ndarrays.PLAIN or to == proto.TensorProto.STRING or x.dtype == object:
        return None  # strings, float8 and the like: the evaluator's rules
    return x.astype(ndarrays.tensor_dtype_to_np_dtype(to))


def _concat(args, attrs):
    if any(a.ndim == 0 for a in args) or "axis" not in attrs:
        return None
    return np.concatenate(args, attrs["axis"])


def _gather(args, attrs):
    x, indices = args
    return np.take(x, indices, axis=attrs.get("axis", 0))


def _axes(args) -> tuple | None:
    return None if len(args) < 2 or args[1] is None else tuple(int(a) for a in args[1])


def _unsqueeze(args, attrs):
    axes = _axes(args)
    return None if axes is None else np.expand_dims(args[0], axis=axes)


def _squeeze(args, attrs):
    axes = _axes(args)
    return np.squeeze(args[0]) if axes is None else np.squeeze(args[0], axis=axes)


def _reshape(args, attrs):
    data, shape = args
    shape = np.array(shape, dtype=np.int64)
    if not attrs.get("allowzero", 0):
        zeros = np.where(shape == 0)
        shape[zeros] = np.array(data.shape)[zeros]
    return np.reshape(data, shape)


def _expand(args, attrs):
    data, shape = args
    return None if data.dtype == object else data * np.ones(shape, dtype=data.dtype)


def _slice(args, attrs):
    data, starts, ends, *rest = [*args, None, None][:5]
    axes, steps = rest
    starts, ends = np.atleast_1d(starts), np.atleast_1d(ends)
    parts = [slice(0, n) for n in data.shape]
    axes = range(len(starts)) if axes is None else axes
    steps = [None] * len(starts) if steps is None else steps
    for s, e, a, d in zip(starts, ends, axes, steps):
        parts[a] = slice(s, e, d)
    return data[tuple(parts)]


#: op type -> (the least opset whose form the kernel computes, the kernel).
_KERNELS: dict[str, tuple[int, Callable]] = {
    "Add": (7, _same_type(np.add)), "Sub": (7, _same_type(np.subtract)),
    "Mul": (7, _same_type(np.multiply)), "Div": (7, _same_type(_divide)), "Mod": (10, _mod),
    "Equal": (7, _compare(np.equal)), "Less": (7, _compare(np.less)),
    "Greater": (7, _compare(np.greater)), "LessOrEqual": (12, _compare(np.less_equal)),
    "GreaterOrEqual": (12, _compare(np.greater_equal)), "And": (7, _compare(np.logical_and)),
    "Or": (7, _compare(np.logical_or)), "Where": (9, _where), "Cast": (6, _cast),
    "Concat": (4, _concat), "Gather": (1, _gather), "Unsqueeze": (13, _unsqueeze),
    "Squeeze": (13, _squeeze), "Reshape": (5, _reshape), "Expand": (8, _expand),
    "Slice": (10, _slice),
}


def run(node, opset: int | None, values: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """The node's outputs computed as onnx's reference evaluator computes them, or None where
    these kernels do not cover the node (then the evaluator runs)."""
    found = _KERNELS.get(node.op_type)
    if found is None or node.domain not in ("", "ai.onnx") or opset is None or opset < found[0]:
        return None
    args = [values[n] if n else None for n in node.input]
    while args and args[-1] is None:
        args.pop()
    if any(a is None for a in args[:2]) or len(node.output) != 1:
        return None
    attrs = {a.name: proto.get_attribute_value(a) for a in node.attribute}
    out = found[1](args, attrs)
    return None if out is None else [np.asarray(out)]
