"""nn.rules' attention ops as ONNX's `Attention` (opset 23), where the opset has it.

`DotProductAttention(q, k, v, ...)` and `MaskedDotProductAttention(q, k, v, mask, ...)`
contract q and k over one head axis, normalise over one key-sequence axis and contract that
axis with v; every other axis is kept. ONNX's 4-D Attention computes exactly that for
q `[B, H, Sq, D]`, k `[B, H, Sk, D]`, v `[B, H, Sk, Dv]` and an additive mask broadcast to
`[B, H, Sq, Sk]` (onnxruntime broadcasts it over B and H only), with `scale` given (its
default, 1/√D, is not ngrules'). So a node whose q, k, v share two batch axes (batch and
heads) and have one axis of their own each is one Attention, its operands in that order (the
batch axes in the order q's value has them). Any other attention, or an opset before 23, is
written from the op's body (`forms`).
"""

from __future__ import annotations

from ngrules.interop.onnx.exporting.emitter import Emitter
from ngrules.interop.onnx.exporting.layout import Value
from ngrules.ir.axes import Axes
from ngrules.ir.graph import Node

ATTENTION_OPSET = 23


def _one(axes: Axes):
    return axes[0] if len(axes) == 1 else None


def _roles(n: Node):
    """(batch axes, Sq, Sk, D, Dv) of an attention node, or None when it is not ONNX's."""
    q, k, v = n.args[:3]
    head, key = Axes(n.attrs["key_axes"]), Axes(n.attrs["softmax_axes"])
    if Axes(n.attrs["value_axes"]) != key or len(head) != 1 or len(key) != 1:
        return None
    batch = (q.axes & k.axes & v.axes) - head - key
    sq, sk = _one(q.axes - batch - head), _one(k.axes - batch - head)
    dv = _one(v.axes - batch - key)
    if (len(batch) != 2 or None in (sq, sk, dv) or sk != key[0]
            or set(n.axes) != {*batch, sq, dv} or len(k.axes) != 4 or len(q.axes) != 4):
        return None
    if len(n.args) == 4 and not {sq, sk} <= set(n.args[3].axes) <= {*batch, sq, sk}:
        return None  # onnxruntime broadcasts a mask over batch and heads only
    return batch, sq, sk, head[0], dv


def attention_op(em: Emitter, n: Node) -> Value | None:
    """The node as one ONNX Attention, or None (an earlier opset, or another shape)."""
    roles = _roles(n) if em.opset >= ATTENTION_OPSET else None
    if roles is None:
        return None
    batch, sq, sk, d, dv = roles
    q, k, v = n.args[:3]
    b = tuple(a for a in em.values[q].dims if a in batch)
    b = b if len(b) == 2 else tuple(batch)
    inputs = [em.exact(q, (*b, sq, d)), em.exact(k, (*b, sk, d)), em.exact(v, (*b, sk, dv))]
    if len(n.args) == 4:
        inputs.append(em.aligned(n.args[3], (*b, sq, sk)))
    y = em.node("Attention", inputs, scale=float(n.attrs["scale"]))
    dims = (*b, sq, dv)
    return Value(dims, tuple(a.length for a in dims), y)
