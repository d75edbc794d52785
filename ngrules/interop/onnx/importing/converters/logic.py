"""ONNX logic (And, Or, Xor, Not and their bitwise twins: one op each on bool or integer
tensors), BitShift, and the float tests IsNaN and IsInf."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.importing.context import Context, converter, elementwise
from ngrules.interop.onnx.importing.shaping import Tensor, broadcast_to
from ngrules.ir import builders as F
from ngrules.ir.graph import make_node

_LOGIC = {"And": "And", "Or": "Or", "Xor": "Xor", "BitwiseAnd": "And", "BitwiseOr": "Or",
          "BitwiseXor": "Xor"}


@converter(*_LOGIC)
def _logic(ctx: Context):
    return [elementwise(ctx, _LOGIC[ctx.op], ctx.x(0), ctx.x(1))]


@converter("BitShift")
def _bit_shift(ctx: Context):
    x = ctx.x(0)
    direction = ctx.attr("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.unsupported(f"BitShift direction {direction!r}")
    out = ctx.out_axes(0)
    args = [broadcast_to(t, out) for t in (x, ctx.x(1))]
    return [Tensor(make_node("BitShift", args, direction=direction.lower()), out)]


@converter("Not", "BitwiseNot", "IsNaN")
def _unary(ctx: Context):
    x = ctx.x(0)
    return [Tensor(make_node("IsNaN" if ctx.op == "IsNaN" else "Not", (x.node,)), x.axes)]


@converter("IsInf")
def _is_inf(ctx: Context):
    """Either infinity by default; detect_negative=0 or detect_positive=0 keep one sign."""
    x = ctx.x(0)
    negative, positive = ctx.attr("detect_negative", 1), ctx.attr("detect_positive", 1)
    found = make_node("IsInf", (x.node,))
    zero = F.constant(0, dtype=x.node.dtype)
    if not negative and not positive:
        found = F.broadcast(F.constant(False, dtype=np.bool_), x.node.axes)
    elif not negative:
        found = make_node("And", (found, F.greater(x.node, zero)))
    elif not positive:
        found = make_node("And", (found, F.less(x.node, zero)))
    return [Tensor(found, x.axes)]
