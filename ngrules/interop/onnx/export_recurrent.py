"""LSTM, GRU and RNN nodes written as the ONNX ops they are: inputs in ONNX's order (the op's
own), inputs that are zeros (absent when imported) left out, attributes at their defaults not
written."""

from __future__ import annotations

from ngrules.interop.onnx.emitter import Emitter, layout_exporter
from ngrules.interop.onnx.layout import Value
from ngrules.ir.graph import Node
from ngrules.ir.values import scalar_value


def _optional(em: Emitter, node: Node) -> str:
    """An optional input's name, or "" (absent) where it is zeros, ONNX's meaning of absent."""
    return "" if scalar_value(node) == 0.0 else em.exact(node)


@layout_exporter("LSTM", "GRU", "RNN")
def _recurrent(em: Emitter, n: Node) -> Value:
    x, w, r, b, *states = n.args
    inputs = [em.exact(x), em.exact(w), em.exact(r), _optional(em, b), ""]
    inputs += [_optional(em, s) for s in states]
    while not inputs[-1]:
        inputs.pop()
    a = n.attrs
    attrs = {"hidden_size": r.axes[2].length, "direction": a["direction"]}
    if a["layout"]:
        attrs["layout"] = a["layout"]
    if a["activations"]:
        attrs["activations"] = a["activations"].split(",")
    if a["clip"] > 0:
        attrs["clip"] = a["clip"]
    if a.get("linear_before_reset"):
        attrs["linear_before_reset"] = a["linear_before_reset"]
    outs = em.node(n.op, inputs, n_out=len(n.outputs), **attrs)
    em.parts[n] = outs
    return Value((), (), outs[0])


#: Imported by the exporter, which needs these ops registered.
LOADED = True
