"""Export of the ops added for what real networks need (gather, logic, rounding, trigonometry),
kept beside `exporter` and merged into its table: each entry is `(emitter, node, argument
names) -> output name`, as there."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ngrules.interop.onnx import OnnxError, ndarrays


def _same(op: str):
    return lambda em, n, a: em.node(op, a)


def _gather(em, n, a):
    """ONNX Gather (negative indices count from the end, as the op's; the op clips indices
    still out of range, which ONNX leaves undefined)."""
    x = n.args[0]
    return em.node("Gather", a, axis=x.axes.index(n.attrs["axis"]))


def _scatter_add(em, n, a):
    """ScatterND with reduction add into zeros laid out (axis, the rest), then transposed
    back; indices normalised and clipped as the op's kernel does."""
    delta, indices = n.args
    axis = n.attrs["axis"]
    pos, size = n.axes.index(axis), axis.length
    k = len(indices.axes)
    rest = [i for i in range(len(delta.axes)) if not pos <= i < pos + k]
    updates = _transposed(em, a[0], list(range(pos, pos + k)) + rest)
    index = em.node("Cast", [a[1]], to=_elem(np.int64))
    negative = em.node("Less", [index, em.const(0)])
    index = em.node("Where", [negative, em.node("Add", [index, em.const(size)]), index])
    index = em.node("Clip", [index, em.const(0), em.const(size - 1)])
    index = em.node("Unsqueeze", [index, em.const([-1])])
    others = [ax for ax in n.axes if ax != axis]
    shape = em.const([size] + [ax.length for ax in others])
    zeros = em.node("ConstantOfShape", [shape],
                    value=ndarrays.from_array(np.zeros(1, n.dtype)))
    out = em.node("ScatterND", [zeros, index, updates], reduction="add")
    return _transposed(em, out, _inverse([pos] + [i for i in range(len(n.axes)) if i != pos]))


def _inverse(perm):
    return [perm.index(i) for i in range(len(perm))]


def _transposed(em, name: str, perm: list[int]) -> str:
    """A Transpose, or the value itself where `perm` keeps every dimension (a scalar too)."""
    if perm == sorted(perm):
        return name
    return em.node("Transpose", [name], perm=perm)


def _top_k_indices(em, n, a):
    x = n.args[0]
    k = em.const([n.attrs["top"].length])
    _, indices = em.node("TopK", [a[0], k], n_out=2, axis=x.axes.index(n.attrs["axis"]),
                         largest=n.attrs["largest"])
    return indices


def _logic(op: str):
    def emit(em, n, a):
        if n.dtype != np.bool_:
            raise OnnxError(f"cannot export {n!r}: bitwise {op} on integers needs opset 18")
        return em.node(op, a)

    return emit


#: The first opset whose Mod defines fmod=0 for floats (Mod-13 has it for integers only).
FLOAT_MOD = 28


def _mod(em, n, a):
    """ONNX Mod; before opset 28 its fmod=0 is for integers only, so a float mod is
    x - y * floor(x / y) there."""
    if n.attrs["fmod"] or n.dtype.kind in "iu" or getattr(em, "target", em.opset) >= FLOAT_MOD:
        return em.node("Mod", a, **({"fmod": 1} if n.attrs["fmod"] else {}))  # 0: the default
    quotient = em.node("Floor", [em.node("Div", a)])
    return em.node("Sub", [a[0], em.node("Mul", [a[1], quotient])])


def _bit_shift(em, n, a):
    """ONNX BitShift (unsigned types in opset 17); a shift outside [0, bits), which ONNX
    leaves undefined there, gives 0 as the op's."""
    if n.dtype.kind != "u":
        raise OnnxError(f"cannot export {n!r}: ONNX's BitShift shifts unsigned integers only")
    bits = n.dtype.itemsize * 8
    inside = em.node("Less", [a[1], em.const(bits, dtype=n.dtype)])
    shifted = em.node("BitShift", a, direction=n.attrs["direction"].upper())
    return em.node("Where", [inside, shifted, em.const(0, dtype=n.dtype)])


def _trunc_divide(em, n, a):
    """ONNX Div on integers rounds toward zero (a divisor 0 made 1, the result 0, as the
    op's); on floats it is Div, then trunc."""
    if n.dtype.kind in "iu":
        zero, one = em.const(0, dtype=n.dtype), em.const(1, dtype=n.dtype)
        by_zero = em.node("Equal", [a[1], zero])
        quotient = em.node("Div", [a[0], em.node("Where", [by_zero, one, a[1]])])
        return em.node("Where", [by_zero, zero, quotient])
    quotient = em.node("Div", a)
    size = em.node("Floor", [em.node("Abs", [quotient])])
    return em.node("Mul", [em.node("Sign", [quotient]), size])


def _bit_cast(em, n, a):
    raise OnnxError(f"cannot export {n!r}: ONNX's BitCast is from opset 26; "
                    "ngrules exports opset 17")


def _one_hot(em, n, a):
    """ONNX OneHot along a new first axis; a negative index (ONNX counts it from the end, the
    op finds no class for it) goes out of range first."""
    depth = n.attrs["axis"].length
    index = em.node("Cast", a, to=_elem(np.int64))
    negative = em.node("Less", [index, em.const(0)])
    index = em.node("Where", [negative, em.const(depth), index])
    values = em.const([0, 1], dtype=np.float32)  # onnxruntime's OneHot kernels are few
    scalar = not n.args[0].axes  # ONNX's OneHot takes indices of rank 1 or more
    if scalar:
        index = em.node("Unsqueeze", [index, em.const([0])])
    hot = em.node("OneHot", [index, em.const(depth), values], axis=0)
    if scalar:
        hot = em.node("Squeeze", [hot, em.const([1])])
    return hot if n.dtype == np.float32 else em.node("Cast", [hot], to=_elem(n.dtype))


def _elem(dtype) -> int:
    return ndarrays.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _conv_bprop_data(em, n, a):
    """ONNX ConvTranspose: delta (K, M, P, Q, N) and filters (C/G, T, R, S, K) in ONNX's
    layouts; output_padding gives the lengths the symmetric padding leaves open."""
    delta, w = n.args
    pads = [int(p) for p in n.attrs["padding"]]
    strides = [int(s) for s in n.attrs["strides"]]
    dilation = [int(d) for d in n.attrs["dilation"]]
    extra = [length - (s * (m - 1) + d * (k - 1) + 1 - 2 * p) for length, m, k, s, d, p in zip(
        n.axes.lengths[1:4], delta.axes.lengths[1:4], w.axes.lengths[1:4], strides, dilation,
        pads)]
    x = em.node("Transpose", [a[0]], perm=[4, 0, 1, 2, 3])
    filters = em.node("Transpose", [a[1]], perm=[4, 0, 1, 2, 3])
    y = em.node("ConvTranspose", [x, filters], pads=pads + pads, strides=strides,
                dilations=dilation, output_padding=extra, group=n.attrs["groups"])
    return em.node("Transpose", [y], perm=[1, 2, 3, 4, 0])


EXPORTERS: dict[str, Callable] = {
    "ConvBpropData": _conv_bprop_data,
    "OneHot": _one_hot,
    "Gather": _gather,
    "ScatterAdd": _scatter_add,
    "TopKIndices": _top_k_indices,
    "Sin": _same("Sin"),
    "Cos": _same("Cos"),
    "Atan": _same("Atan"),
    "Floor": _same("Floor"),
    "Ceil": _same("Ceil"),
    "Round": _same("Round"),
    "IsNaN": _same("IsNaN"),
    "IsInf": _same("IsInf"),
    "Not": _logic("Not"),
    "Mod": _mod,
    "BitShift": _bit_shift,
    "TruncDivide": _trunc_divide,
    "BitCast": _bit_cast,
}
