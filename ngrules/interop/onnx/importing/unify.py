"""What each ONNX op says about its dimension slots: which are one axis (see `axes`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ngrules.interop.onnx.importing.axes import Naming, Slot

def _same(n: Naming, a: str, b: str) -> None:
    """Positional: equal-length dimensions of two values of the same rank are one axis."""
    sa, sb = n.slots(a), n.slots(b)
    if len(sa) == len(sb):
        for x, y in zip(sa, sb):
            n.unify(x, y)


def _trailing(n: Naming, a: str, out: str) -> None:
    """numpy broadcasting: a's dimensions align with out's trailing ones."""
    sa, so = n.slots(a), n.slots(out)
    for x, y in zip(reversed(sa), reversed(so)):
        n.unify(x, y)


def _broadcast(n: Naming, node, consts) -> None:
    for out in node.output[:1]:
        for name in node.input:
            if name:
                _trailing(n, name, out)


def _matmul(n: Naming, node, consts) -> None:
    a, b, out = (n.slots(v) for v in (node.input[0], node.input[1], node.output[0]))
    if not a or not b or not out:
        return
    n.unify(a[-1], b[-2] if len(b) > 1 else b[-1])
    if len(a) > 1:
        n.unify(a[-2], out[-2 if len(b) > 1 else -1])
    if len(b) > 1:
        n.unify(b[-1], out[-1])
    for x, y in zip(reversed(a[:-2]), reversed(out[: len(out) - 2])):
        n.unify(x, y)
    for x, y in zip(reversed(b[:-2]), reversed(out[: len(out) - 2])):
        n.unify(x, y)


def _gemm(n: Naming, node, consts) -> None:
    attrs = {a.name: a.i for a in node.attribute}
    a, b, out = (n.slots(v) for v in (node.input[0], node.input[1], node.output[0]))
    if len(a) != 2 or len(b) != 2 or len(out) != 2:
        return
    a = a[::-1] if attrs.get("transA") else a
    b = b[::-1] if attrs.get("transB") else b
    n.unify(a[1], b[0])
    n.unify(a[0], out[0])
    n.unify(b[1], out[1])
    if len(node.input) > 2 and node.input[2]:
        _trailing(n, node.input[2], node.output[0])


def _spatial_hints(n: Naming, slots: list[Slot]) -> None:
    names = {1: "W", 2: "HW", 3: "DHW"}.get(len(slots) - 2, "")
    for slot, name in zip(slots[2:], names):
        n.hint(slot, name)
    if slots:
        n.hint(slots[0], "N")
        n.hint(slots[1], "C")


def _conv(n: Naming, node, consts) -> None:
    x, w, y = (n.slots(v) for v in (node.input[0], node.input[1], node.output[0]))
    if len(x) < 2 or len(y) < 2 or 0 < len(w) < 2:  # ranks a Conv cannot have: no axes shared
        return
    n.unify(x[0], y[0])
    group = next((a.i for a in node.attribute if a.name == "group"), 1)
    if w and group == 1:
        n.unify(x[1], w[1])
    if w:
        n.unify(w[0], y[1])
    if len(node.input) > 2 and node.input[2]:
        bias = n.slots(node.input[2])
        if bias:
            n.unify(bias[0], y[1])
    _spatial_hints(n, x)
    _spatial_hints(n, y)


def _pool(n: Naming, node, consts) -> None:
    x, y = n.slots(node.input[0]), n.slots(node.output[0])
    if len(x) >= 2 and len(y) >= 2:
        n.unify(x[0], y[0])
        n.unify(x[1], y[1])
        _spatial_hints(n, x)
        _spatial_hints(n, y)


def _batchnorm(n: Naming, node, consts) -> None:
    x = n.slots(node.input[0])
    if not x:
        return
    _same(n, node.input[0], node.output[0])
    channel = x[1] if len(x) > 1 else x[0]
    for name in list(node.input[1:]) + list(node.output[1:]):
        slots = n.slots(name) if name else []
        if slots:
            n.unify(slots[0], channel)
    if len(x) > 1:
        n.hint(x[0], "N")
        n.hint(x[1], "C")


def _layernorm(n: Naming, node, consts) -> None:
    _same(n, node.input[0], node.output[0])
    for name in node.input[1:]:
        if name:
            _trailing(n, name, node.input[0])


def _transpose(n: Naming, node, consts) -> None:
    x, y = n.slots(node.input[0]), n.slots(node.output[0])
    perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
    perm = perm if perm else list(range(len(x)))[::-1]
    if len(perm) == len(y) == len(x) and sorted(perm) == list(range(len(x))):
        for i, p in enumerate(perm):
            n.unify(y[i], x[p])


def _reduce_axes(node, consts, rank: int) -> list[int] | None:
    axes = next((list(a.ints) for a in node.attribute if a.name == "axes"), None)
    if axes is None and len(node.input) > 1 and node.input[1]:
        const = consts.get(node.input[1])
        axes = None if const is None else [int(v) for v in np.ravel(const)]
    if axes is None:
        return None
    return sorted(a % rank for a in axes) if rank else []


def _reduce(n: Naming, node, consts) -> None:
    x, y = n.slots(node.input[0]), n.slots(node.output[0])
    if len(x) == len(y):
        _same(n, node.input[0], node.output[0])
        return
    red = _reduce_axes(node, consts, len(x))
    if node.op_type in ("ArgMax", "ArgMin"):
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        red = [axis % len(x)] if x else []
    kept = [s for i, s in enumerate(x) if red is not None and i not in red]
    if len(kept) == len(y):
        for a, b in zip(kept, y):
            n.unify(a, b)


def _squeeze(n: Naming, node, consts) -> None:
    """Squeeze and Unsqueeze: the dimensions longer than 1 keep their order."""
    x, y = n.slots(node.input[0]), n.slots(node.output[0])
    big_x = [s for s in x if n.length(s) > 1]
    big_y = [s for s in y if n.length(s) > 1]
    if len(big_x) == len(big_y):
        for a, b in zip(big_x, big_y):
            n.unify(a, b)


def reshape_groups(src: Sequence[int], dst: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """Runs (i0, i1, j0, j1) with prod(src[i0:i1]) == prod(dst[j0:j1]), finest first."""
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        i0, j0 = i, j
        a = src[i] if i < len(src) else 1
        b = dst[j] if j < len(dst) else 1
        i, j = min(i + 1, len(src)), min(j + 1, len(dst))
        while a != b:
            if a < b and i < len(src):
                a, i = a * src[i], i + 1
            elif j < len(dst):
                b, j = b * dst[j], j + 1
            else:
                break
        groups.append((i0, i, j0, j))
    return groups


def _reshape(n: Naming, node, consts) -> None:
    x, y = n.slots(node.input[0]), n.slots(node.output[0])
    if not x or not y:
        return
    shapes = [n.length(s) for s in x], [n.length(s) for s in y]
    for i0, i1, j0, j1 in reshape_groups(*shapes):
        if i1 - i0 == 1 and j1 - j0 == 1:
            n.unify(x[i0], y[j0])
        elif j1 - j0 == 1:
            n.flattened(y[j0], x[i0:i1])
        elif i1 - i0 == 1:
            n.flattened(x[i0], y[j0:j1])


def _concat(n: Naming, node, consts) -> None:
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    out = n.slots(node.output[0])
    for name in node.input:
        slots = n.slots(name)
        for i, (a, b) in enumerate(zip(slots, out)):
            if i != axis % max(len(out), 1):
                n.unify(a, b)


def _split(n: Naming, node, consts) -> None:
    for out in node.output:
        if out:
            _same(n, node.input[0], out)


def _first(n: Naming, node, consts) -> None:
    for out in node.output:
        if out and node.input and node.input[0]:
            _same(n, node.input[0], out)


UNIFY: dict[str, Callable] = {
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Conv": _conv,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "GlobalAveragePool": _pool,
    "GlobalMaxPool": _pool,
    "BatchNormalization": _batchnorm,
    "LayerNormalization": _layernorm,
    "Transpose": _transpose,
    "Squeeze": _squeeze,
    "Unsqueeze": _squeeze,
    "Reshape": _reshape,
    "Flatten": _reshape,
    "Concat": _concat,
    "Split": _split,
    **dict.fromkeys(
        ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2",
         "ReduceSumSquare", "ReduceLogSumExp", "ArgMax", "ArgMin"),
        _reduce,
    ),
    **dict.fromkeys(
        ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where", "Equal",
         "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "PRelu", "And", "Or", "Xor"),
        _broadcast,
    ),
}




def unify_node(naming: Naming, node, consts) -> None:
    """Apply the node's rule (positional sameness with its first input by default)."""
    UNIFY.get(node.op_type, _first)(naming, node, consts)
