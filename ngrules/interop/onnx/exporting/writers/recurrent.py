"""LSTM, GRU and RNN nodes written as the ONNX ops they are: inputs in ONNX's order (the op's
own), inputs that are zeros (absent when imported) left out, attributes at their defaults not
written. A batch-first layer (`layout=1`, which onnxruntime refuses) is written in ONNX's
default layout between transposes."""

from __future__ import annotations

from ngrules.interop.onnx.exporting.emitter import Emitter, layout_exporter
from ngrules.interop.onnx.exporting.layout import Value
from ngrules.ir.graph import Node
from ngrules.ir.values import scalar_value


def _optional(em: Emitter, node: Node) -> str:
    """An optional input's name, or "" (absent) where it is zeros, ONNX's meaning of absent."""
    return "" if scalar_value(node) == 0.0 else em.exact(node)


def _swapped(em: Emitter, name: str, swap: bool) -> str:
    """X [batch, seq, input] or a state [batch, dirs, hidden], its first two axes swapped."""
    return em.node("Transpose", [name], perm=[1, 0, 2]) if swap and name else name


@layout_exporter("LSTM", "GRU", "RNN")
def _recurrent(em: Emitter, n: Node) -> Value:
    x, w, r, b, *states = n.args
    a = n.attrs
    swap = bool(a["layout"])  # batch first: swapped into sequence first around the node
    inputs = [_swapped(em, em.exact(x), swap), em.exact(w), em.exact(r), _optional(em, b), ""]
    inputs += [_swapped(em, _optional(em, s), swap and i < 2)  # h0, c0; not peepholes
               for i, s in enumerate(states)]
    while not inputs[-1]:
        inputs.pop()
    attrs = {"hidden_size": r.axes[2].length, "direction": a["direction"]}
    if a["activations"]:
        attrs["activations"] = a["activations"].split(",")
    if a["clip"] > 0:
        attrs["clip"] = a["clip"]
    if a.get("linear_before_reset"):
        attrs["linear_before_reset"] = a["linear_before_reset"]
    outs = em.node(n.op, inputs, n_out=len(n.outputs), **attrs)
    if swap:  # Y [seq, dirs, batch, hidden] -> [batch, seq, dirs, hidden]; states [batch, ...]
        outs = [em.node("Transpose", [o], perm=[2, 0, 1, 3] if i == 0 else [1, 0, 2])
                for i, o in enumerate(outs)]
    em.parts[n] = outs
    return Value((), (), outs[0])


#: Imported by the exporter, which needs these ops registered.
LOADED = True
