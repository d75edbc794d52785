"""ONNX elementwise and matrix ops as ngrules ops (or primitives where ngrules has no one op)."""

from __future__ import annotations

import itertools

import numpy as np

from ngrules.interop.onnx.importing.context import Context, converter, elementwise
from ngrules.interop.onnx.importing.converters.shape import cut
from ngrules.interop.onnx.importing.shaping import (
    Tensor,
    broadcast_to,
    conform,
    fit,
    squeeze,
    temp_axis,
)
from ngrules.ir import builders as F
from ngrules.ir import layers
from ngrules.ir.graph import make_node
from ngrules.ir.values import scalar_value

_BINARY = {"Add": "Add", "Sub": "Subtract", "Mul": "Multiply", "Div": "Divide"}
_VARIADIC = {"Max": "Maximum", "Min": "Minimum", "Sum": "Add"}
_UNARY = {
    "Neg": "Negative",
    "Reciprocal": "Reciprocal",
    "Sqrt": "Sqrt",
    "Exp": "Exp",
    "Log": "Log",
    "Tanh": "Tanh",
}


@converter(*_BINARY)
def _binary(ctx: Context):
    a, b = ctx.x(0), ctx.x(1)
    if ctx.op == "Div" and a.node.dtype.kind in "iu":  # C's division, toward zero
        return [elementwise(ctx, "TruncDivide", a, b)]
    if ctx.op == "Add":
        for kept, zero in ((a, b), (b, a)):
            if _adds_nothing(ctx, kept, zero):
                return [conform(kept, ctx.out_axes(0))]
    return [elementwise(ctx, _BINARY[ctx.op], a, b)]


def _adds_nothing(ctx: Context, kept: Tensor, zero: Tensor) -> bool:
    """Whether `kept + zero` is `kept`: zero is known to hold 0 everywhere (an untrained
    layer's bias) and broadcasts kept to nothing larger, of another type or order."""
    return (scalar_value(zero.node) == 0.0 and kept.shape == tuple(ctx.out_shape())
            and kept.node.dtype == ctx.out_dtype())


@converter(*_VARIADIC, "Mean")
def _variadic(ctx: Context):
    out = ctx.out_axes(0)
    args = [broadcast_to(ctx.x(i), out) for i in range(ctx.arity) if ctx.has(i)]
    total = args[0]
    for a in args[1:]:
        total = make_node(_VARIADIC.get(ctx.op, "Add"), (total, a))
    if ctx.op == "Mean" and len(args) > 1:
        total = total / float(len(args))
    return [Tensor(total, out)]


def _same(ctx: Context, node) -> list:
    return [Tensor(node, ctx.x(0).axes)]


@converter(*_UNARY)
def _unary(ctx: Context):
    return _same(ctx, make_node(_UNARY[ctx.op], (ctx.x(0).node,)))


@converter("Identity", "Dropout")
def _identity(ctx: Context):
    if ctx.op == "Dropout":
        training = ctx.const(2) if ctx.has(2) else False
        ratio = ctx.const(1) if ctx.has(1) else 0.5
        if training is None or ratio is None:
            raise ctx.unsupported("Dropout's ratio or training mode given at run time")
        if bool(training) and float(ratio) > 0:
            raise ctx.unsupported("Dropout in training mode")
        if len(ctx.node.output) > 1 and ctx.node.output[1]:
            x = ctx.x(0)
            mask = F.constant(True, x.axes, dtype=np.bool_)
            return [x, Tensor(mask, x.axes)]
    return [ctx.x(0)]


@converter("Relu", "LeakyRelu")
def _relu(ctx: Context):
    slope = ctx.attr("alpha", 0.01) if ctx.op == "LeakyRelu" else 0.0
    return _same(ctx, make_node("Relu", (ctx.x(0).node,), slope=slope))


_COMPARE = {
    "Equal": "Equal",
    "Less": "Less",
    "Greater": "Greater",
    "LessOrEqual": "LessEqual",
    "GreaterOrEqual": "GreaterEqual",
}


@converter("Abs", "Sign", "Sigmoid")
def _one_op(ctx: Context):
    return _same(ctx, make_node({"Abs": "Absolute"}.get(ctx.op, ctx.op), (ctx.x(0).node,)))


@converter(*_COMPARE)
def _compare(ctx: Context):
    return [elementwise(ctx, _COMPARE[ctx.op], ctx.x(0), ctx.x(1))]


@converter("Where")
def _where(ctx: Context):
    return [elementwise(ctx, "Select", ctx.x(0), ctx.x(1), ctx.x(2))]


@converter("Cast", "CastLike")
def _cast(ctx: Context):
    if ctx.attr("saturate", 1) != 1 and ctx.out_dtype().kind == "f":
        raise ctx.unsupported("Cast with saturate=0")
    return _same(ctx, F.cast(ctx.x(0).node, ctx.out_dtype()))


@converter("BitCast")
def _bit_cast(ctx: Context):
    x, dtype = ctx.x(0), ctx.out_dtype()
    if dtype.itemsize != x.node.dtype.itemsize:
        raise ctx.unsupported(f"a BitCast from {x.node.dtype} to {dtype}")
    return _same(ctx, make_node("BitCast", (x.node,), dtype=dtype))


@converter("Erf")
def _erf(ctx: Context):
    return _same(ctx, F.erf(ctx.x(0).node))


@converter("Gelu")
def _gelu(ctx: Context):
    x = ctx.x(0).node
    if ctx.attr("approximate", "none") == "tanh":
        return _same(ctx, layers.gelu(x))
    return _same(ctx, layers.gelu_erf(x))


@converter("HardSigmoid")
def _hard_sigmoid(ctx: Context):
    x = ctx.x(0).node
    y = F.maximum(F.minimum(ctx.attr("alpha", 0.2) * x + ctx.attr("beta", 0.5), 1.0), 0.0)
    return _same(ctx, y)


@converter("Softplus")
def _softplus(ctx: Context):
    return _same(ctx, F.log(F.exp(ctx.x(0).node) + 1.0))


@converter("Elu")
def _elu(ctx: Context):
    x = ctx.x(0).node
    alpha = ctx.attr("alpha", 1.0)
    return _same(ctx, F.maximum(x, 0.0) + alpha * (F.exp(F.minimum(x, 0.0)) - 1.0))


@converter("Clip")
def _clip(ctx: Context):
    t = ctx.x(0)
    for i, name, op in ((1, "min", "Maximum"), (2, "max", "Minimum")):
        if ctx.has(i):
            t = elementwise(ctx, op, t, ctx.x(i))
        elif ctx.attr(name) is not None:
            bound = F.constant(ctx.scalar(ctx.attr(name), t.node.dtype, name),
                               dtype=t.node.dtype)
            t = elementwise(ctx, op, t, Tensor(bound, ()))
    return [t]


@converter("Pow")
def _pow(ctx: Context):
    """x ** 2 and x ** 3 as products (the form fusion rules such as GELU's are written in),
    other exponents as Power."""
    base, exponent = ctx.x(0), ctx.x(1)
    value = ctx.const(1)
    power = value.reshape(()).item() if value is not None and value.size == 1 else None
    if power in (2.0, 3.0):
        x = base.node
        product = x * x if power == 2.0 else x * x * x
        return [Tensor(product, base.axes)] if ctx.out_axes(0) == base.axes else [
            elementwise(ctx, "Multiply", Tensor(product, base.axes),
                        Tensor(F.constant(1.0, dtype=x.dtype), ()))]
    dtype = base.node.dtype
    work = dtype if dtype.kind == "f" else np.dtype(np.float64)  # Power takes floats
    base = Tensor(F.cast(base.node, work), base.axes)
    exponent = Tensor(F.cast(exponent.node, work), exponent.axes)
    result = elementwise(ctx, "Power", base, exponent)
    return [Tensor(F.cast(result.node, dtype), result.axes)]  # ONNX: the base's type


# -- products ----------------------------------------------------------------------------------
def matmul(ctx: Context, a: Tensor, b: Tensor) -> Tensor:
    """numpy's matmul: a Dot when the operands share only the contracted axis, else (batched
    on both sides) a broadcast product summed over it."""
    out = ctx.out_axes(0)
    a_vec, b_vec = len(a.axes) == 1, len(b.axes) == 1
    k = a.axes[-1]
    if k.name in {x.name for x in out}:
        k = temp_axis(k.length)
    batch = out[: len(out) - (not a_vec) - (not b_vec)]
    a_axes = (k,) if a_vec else (*_tail(batch, len(a.axes) - 2), out[-1 if b_vec else -2], k)
    b_axes = (k,) if b_vec else (*_tail(batch, len(b.axes) - 2), k, out[-1])
    a_node, b_node = _renamed(a, a_axes), _renamed(b, b_axes)
    if tuple(a_node.axes & b_node.axes) == (k,):
        # Weights first, as ngraph writes Dot(w, x) and the fold rules expect.
        weights_right = b_node.op == "Constant" and a_node.op != "Constant"
        dot = F.dot(b_node, a_node) if weights_right else F.dot(a_node, b_node)
        return Tensor(dot if dot.axes.is_equal_set(out) else fit(dot, out), out)
    both = tuple(out) + (k,)
    product = fit(a_node, both) * fit(b_node, both)
    return Tensor(F.sum(product, reduction_axes=[k]), out)


def _tail(axes, n: int) -> tuple:
    return tuple(axes[len(axes) - n :]) if n > 0 else ()


def _renamed(t: Tensor, axes):
    """t conformed to `axes`, squeezing the length-1 batch dimensions numpy broadcasts."""
    drop = [x for x, y in zip(t.axes, axes) if x.length != y.length]
    kept = tuple(x for x in t.axes if x not in drop)
    keep_axes = tuple(y for x, y in zip(t.axes, axes) if x.length == y.length)
    return conform(Tensor(squeeze(t.node, drop), kept), keep_axes).node


@converter("MatMul")
def _matmul(ctx: Context):
    return [matmul(ctx, ctx.x(0), ctx.x(1))]


@converter("Gemm")
def _gemm(ctx: Context):
    a, b = ctx.x(0), ctx.x(1)
    if ctx.attr("transA", 0):
        a = Tensor(a.node, a.axes[::-1])
    if ctx.attr("transB", 0):
        b = Tensor(b.node, b.axes[::-1])
    y = matmul(ctx, a, b)
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    node = y.node if alpha == 1.0 else y.node * alpha
    if ctx.has(2) and beta != 0.0:
        c = broadcast_to(ctx.x(2), y.axes)
        node = fit(node, y.axes) + (c if beta == 1.0 else c * beta)
    return [Tensor(node, y.axes)]


@converter("Det")
def _det(ctx: Context):
    """The sum over permutations s of sign(s) * the product of x[i, s(i)] (Leibniz's formula,
    so differentiable), for matrices up to 5 x 5."""
    x = ctx.x(0)
    n = x.shape[-1]
    if n > 5 or x.shape[-2] != n:
        raise ctx.unsupported(f"a determinant of a {x.shape[-2]} x {n} matrix (Leibniz's "
                              "formula is written out up to 5 x 5)")
    rank = len(x.axes)
    lead = x.axes[: rank - 2]

    def entry(i: int, j: int):
        row = cut(x, rank - 2, i, i + 1, temp_axis(1))
        cell = cut(row, rank - 1, j, j + 1, temp_axis(1))
        return squeeze(cell.node, list(cell.axes[rank - 2 :]))

    cells = {(i, j): entry(i, j) for i in range(n) for j in range(n)}
    total = None
    for perm in itertools.permutations(range(n)):
        inversions = sum(a > b for a, b in itertools.combinations(perm, 2))
        term = cells[0, perm[0]]
        for i in range(1, n):
            term = term * cells[i, perm[i]]
        if total is None:
            total = term if inversions % 2 == 0 else -term
        else:
            total = total + term if inversions % 2 == 0 else total - term
    return [conform(Tensor(total, lead), ctx.out_axes(0))]
