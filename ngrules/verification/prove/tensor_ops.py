"""Tensor ops unrolled into scalar z3 terms at an instance's (small) sizes.

Softmax as its kernel computes it (exp of x minus the group's max, over the group's sum);
Argmax and Argmin as a chain of comparisons (the first extreme position, in x's order);
max and average pooling window by window; Pad and Convolution by their own numpy kernels on
object arrays (they only move, add and multiply elements); a declared op through its body
(a declaration is its own encoding). Each takes the node and its arguments' object arrays of
`Sym` and gives the node's object array (a tuple for a multi-output declared op).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import z3

from ngrules.ir import declared
from ngrules.ir.builtin.windows import padded, taps
from ngrules.ir.graph import Node
from ngrules.ir.ops import OPS
from ngrules.verification.prove.scalars import EXP, SQRT, Sym


def as_syms(values) -> np.ndarray:
    """An object array whose every element is a Sym (a kernel's 0 fill is a plain number)."""
    arr = np.asarray(values, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    for idx in np.ndindex(arr.shape):
        out[idx] = Sym.of(arr[idx])
    return out


def grouped(node: Node, x: np.ndarray, axes, x_order: bool) -> tuple[np.ndarray, list[int]]:
    """x with `axes` moved last and merged into one, in x's order or in the order of `axes`
    (as Sum and Max unroll, so that equal sums are equal terms): (kept..., group), and the
    order of x's axes that took it there."""
    src = node.args[0].axes
    where = [src.index(a) for a in (src if x_order else axes) if a in axes]
    keep = [i for i in range(x.ndim) if i not in where]
    moved = x.transpose(keep + where)
    return moved.reshape(tuple(x.shape[i] for i in keep) + (-1,)), keep + where


def pick(a: Sym, b: Sym, biggest: bool) -> Sym:
    cond = a.v >= b.v if biggest else a.v <= b.v
    return Sym(z3.If(cond, a.v, b.v), z3.And(a.ok, b.ok))


def _ok(syms) -> object:
    return z3.And(*[s.ok for s in syms]) if len(syms) else z3.BoolVal(True)


def softmax(node: Node, x: np.ndarray) -> np.ndarray:
    """exp(x - max) / sum(exp(x - max)) over the normalization axes, as the kernel computes it
    (the sum is positive: exp's axioms say so, so the division is always defined)."""
    moved, order = grouped(node, x, node.attrs["normalization_axes"], False)
    out = np.empty(moved.shape, dtype=object)
    for idx in np.ndindex(moved.shape[:-1]):
        group = list(moved[idx])
        top = functools.reduce(lambda a, b: pick(a, b, True), group)
        exps = [EXP(s.v - top.v) for s in group]
        total, ok = functools.reduce(lambda a, b: a + b, exps), _ok(group)
        for j, e in enumerate(exps):
            out[idx + (j,)] = Sym(e / total, ok)
    shaped = out.reshape(tuple(x.shape[i] for i in order))
    return shaped.transpose(np.argsort(order))


def arg_extreme(node: Node, x: np.ndarray) -> np.ndarray:
    """Argmax/Argmin: the first position of the extreme in the flattened reduction axes."""
    biggest = node.op == "Argmax"
    moved, _ = grouped(node, x, node.attrs["reduction_axes"], True)
    out = np.empty(moved.shape[:-1], dtype=object)
    for idx in np.ndindex(out.shape):
        group = list(moved[idx])
        best, at = group[0].v, z3.RealVal(0)
        for i, s in enumerate(group[1:], 1):
            better = s.v > best if biggest else s.v < best
            best, at = z3.If(better, s.v, best), z3.If(better, z3.RealVal(i), at)
        out[idx] = Sym(at, _ok(group))
    return out


def pooling(node: Node, x: np.ndarray) -> np.ndarray:
    """Max pooling as a chain of maxima over each window (padding never wins), average
    pooling as the window's sum (padding adds 0) over the window's size, as the kernel."""
    is_max = node.attrs["mode"] == "max"
    out_shape = node.axes.lengths
    a = padded(x, node.attrs, Sym.of(0.0)) if not is_max else _padded_with_none(x, node)
    out = np.empty(out_shape, dtype=object)
    for _, where in taps(node.attrs["window"].tolist(), node.attrs, out_shape[1:4]):
        part = a[where]
        for idx in np.ndindex(out_shape):
            new, old = part[idx], out[idx]
            if new is None:
                continue
            out[idx] = new if old is None else pick(old, new, True) if is_max else old + new
    size = z3.RealVal(int(np.prod(node.attrs["window"])))
    for idx in np.ndindex(out_shape):
        if out[idx] is None:  # a window of padding alone: the kernel's lowest value
            raise TypeError("a max-pooling window covers only padding")
        if not is_max:
            out[idx] = Sym(out[idx].v / size, out[idx].ok)
    return out


def _padded_with_none(x: np.ndarray, node: Node) -> np.ndarray:
    """x padded on D, H, W with None (a position no maximum takes)."""
    pad = [int(p) for p in node.attrs["padding"]]
    out = np.full(tuple(n + 2 * p for n, p in zip(x.shape, [0, *pad, 0])), None, dtype=object)
    out[tuple(slice(p, p + n) for n, p in zip(x.shape, [0, *pad, 0]))] = x
    return out


def by_kernel(node: Node, *args: np.ndarray) -> np.ndarray:
    """Pad, Reverse and Convolution: their kernels add, multiply and move elements of object
    arrays."""
    result = OPS[node.op].kernel(node)(*args)
    return as_syms(np.asarray(result, dtype=object).reshape(node.axes.lengths))


def through_body(node: Node, args: list[np.ndarray], run: Callable) -> np.ndarray | tuple:
    """A declared op as its body: the body built on stand-ins for the node's arguments, and
    evaluated (by `run(outputs, seeded)`) with the stand-ins holding the arguments' terms."""
    stand_ins, outputs = declared.DECLARATIONS[node.op].body(node)
    values = run(list(outputs), dict(zip(stand_ins, args)))
    return values[0] if node.outputs is None else tuple(values)


def _mean(row: list[Sym], m: int) -> Sym:
    total = functools.reduce(lambda a, b: a + b, row)
    return Sym(total.v / m, total.ok)


def batchnorm_fprop(node: Node, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> tuple:
    """(y, mean, var) per channel (x's first axis) as the fused kernel: y = (x - mean) times
    gamma / sqrt(var + eps), plus beta; defined where var + eps > 0."""
    flat = x.reshape(x.shape[0], -1)
    m, eps = flat.shape[1], z3.RealVal(float(node.attrs["eps"]))
    y, means, variances = np.empty(flat.shape, dtype=object), [], []
    for c, row in enumerate(flat):
        mean = _mean(list(row), m)
        centred = [s - mean for s in row]
        var = _mean([d * d for d in centred], m)
        root = SQRT(var.v + eps)
        ok = z3.And(var.ok, gamma[c].ok, beta[c].ok, var.v + eps > 0)
        for j, d in enumerate(centred):
            y[c, j] = Sym(d.v * (gamma[c].v / root) + beta[c].v, z3.And(ok, d.ok))
        means.append(mean)
        variances.append(var)
    return y.reshape(x.shape), np.array(means, dtype=object), np.array(variances, dtype=object)


#: op name -> its tensor encoding (node, argument arrays) -> array.
TENSOR_OPS: dict[str, Callable] = {
    "Softmax": softmax,
    "Argmax": arg_extreme,
    "Argmin": arg_extreme,
    "Pooling": pooling,
    "Pad": by_kernel,
    "Reverse": by_kernel,
    "Convolution": by_kernel,
    "BatchnormFprop": batchnorm_fprop,
}
