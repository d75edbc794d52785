"""Products, windows and network layers written as the ONNX op they came from.

`Dot` is a MatMul where the operands' orders allow it (a Gemm when a constant bias is added to
it), else one Einsum; Convolution and Pooling are Conv and MaxPool/AveragePool in NCHW, a
constant bias added to a Conv becomes its third input. The primitive forms the importer writes
for BatchNormalization (inference), LayerNormalization, Gelu, LogSoftmax and ReduceMean are
written back as those ops: a node is recognised by building the importer's form again from the
leaves it seems to have and checking that the result is that very node (hash-consing makes equal
graphs one node), so a form that only looks similar is left alone. The fused ops nn.rules
declares (`LayerNorm`, `Gelu`) are written as their standard twins.
"""

from __future__ import annotations

import string

import numpy as np

from ngrules.interop.onnx import OnnxError
from ngrules.interop.onnx.emitter import Emitter, layout_exporter
from ngrules.interop.onnx.export_layout import broadcast_result, reduce, reduction, regroup
from ngrules.interop.onnx.layout import Value, full_value
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes
from ngrules.ir.graph import Node

_VIEWS = ("Broadcast", "ReorderAxes", "AxesCast", "ExpandDims", "Flatten", "Unflatten",
          "TensorSlice")


# -- products ----------------------------------------------------------------------------------
@layout_exporter("Dot")
def _dot(em: Emitter, n: Node) -> Value:
    a, b = n.args
    red = a.axes & b.axes
    if len(red) == 1:
        for x, w in ((a, b), (b, a)):
            v = _matmul(em, x, w, red[0])
            if v is not None:
                return v
    return _einsum(em, n)


def _matmul(em: Emitter, x: Node, w: Node, k) -> Value | None:
    """MatMul(x, w) with x's value ending in k and w 2-D [k, j] (a constant in any order)."""
    vx, vw = em.values[x], em.values[w]
    if len(x.axes) < 2 or len(w.axes) != 2 or not vx.dims or vx.dims[-1] != k:
        return None
    if not all(vx.full(a) for a in x.axes if a.length > 1):
        return None
    (j,) = w.axes - Axes((k,))
    if vw.array is None and not (vw.dims == (k, j) and vw.full(k) and vw.full(j)):
        return None
    wname = em.exact(w, (k, j))
    out = em.node("MatMul", [em.name_of(vx), wname])
    if len(vx.dims) == 2:
        em.biasable[out] = ("Gemm", len(em.nodes) - 1)
    return Value(vx.dims[:-1] + (j,), vx.shape[:-1] + (j.length,), out)


@layout_exporter("DotLowDimension")
def _dot_low(em: Emitter, n: Node) -> Value:
    """A 2-D product as one Gemm reading its operands in the orders they have (transA,
    transB), its result oriented activations first (weights, constants, last) unless its
    reader wants the other order; vectors as before."""
    x, y = n.args
    if len(x.axes) != 2 or len(y.axes) != 2:
        return _positional_matmul(em, n)
    const = [em.values[a].array is not None for a in (x, y)]
    vx, vy = (_matrix(em, a) for a in (x, y))
    (m, k), (k2, j) = x.axes, y.axes
    flip = em.prefer.get(n, ()) == (n.axes[1], n.axes[0]) or (
        n not in em.prefer and const == [True, False])
    if not flip:
        ins, trans = [vx, vy], [vx.dims[0] != m, vy.dims[0] != k2]
        dims = (n.axes[0], n.axes[1])
    else:
        ins, trans = [vy, vx], [vy.dims[0] != j, vx.dims[0] != k]
        dims = (n.axes[1], n.axes[0])
    names = [em.name_of(v) for v in ins]
    if not any(trans):
        y_name = em.node("MatMul", names)
    else:
        y_name = em.node("Gemm", names, transA=int(trans[0]), transB=int(trans[1]))
    em.biasable[y_name] = ("Gemm", len(em.nodes) - 1)
    return full_value(y_name, dims)


@layout_exporter("Unflatten")
def _unflatten(em: Emitter, n: Node) -> Value:
    return _batched_linear(em, n) or regroup(em, n)


def _batched_linear(em: Emitter, n: Node) -> Value | None:
    """Unflatten(DotLowDimension(Flatten(x), w)) with w constant (dot lowering's form of a
    linear layer over leading batch axes): ONNX's MatMul broadcasts over them, so x goes in
    as it is, with no Flatten and no Reshape back."""
    d = n.args[0]
    if d.op != "DotLowDimension" or not em.single_use(d) or len(d.args[0].axes) != 2:
        return None
    for i in (0, 1):
        f, w = d.args[i], d.args[1 - i]
        if f.op != "Flatten" or em.values[w].array is None:
            continue
        k, kw = (f.axes[1], w.axes[0]) if i == 0 else (f.axes[0], w.axes[1])
        j = w.axes[1 - i]
        x, v = f.args[0], em.values[f.args[0]]
        k0 = tuple(a for a in k.leaves() if a.length > 1)
        o = d.axes[1 - i]  # the result's axis for w's side, which the Unflatten splits
        parts = tuple(o.axes) if o.is_flattened else (o,)
        if not k0 or len(parts) != 1 or v.dims[len(v.dims) - len(k0):] != k0:
            continue
        if not v.has_all(x.axes):
            continue
        if len(k0) > 1:  # the contracted axes merged into one, the batch axes kept
            v = em.reshaped(v, v.dims[:-len(k0)] + (k,), v.shape[:-len(k0)] + (k.length,))
        wname = em.exact(w, (kw, j))  # a constant: laid out as MatMul wants it
        dims = v.dims[:-1] + parts
        if {d for d in dims if d in n.axes} != set(n.axes):
            continue
        y = em.node("MatMul", [em.name_of(v), wname])
        return Value(dims, v.shape[:-1] + (parts[0].length,), y)
    return None


def _matrix(em: Emitter, node: Node) -> Value:
    """The node's value as a 2-D matrix of its two axes, in whichever order it has."""
    v = em.complete(node)
    if tuple(v.dims) in (tuple(node.axes), tuple(node.axes)[::-1]):
        return v
    return full_value(em.exact(node), node.axes)


def _positional_matmul(em: Emitter, n: Node) -> Value:
    from ngrules.interop.onnx.export_positional import POSITIONAL

    return full_value(POSITIONAL["DotLowDimension"](em, n, [em.exact(a) for a in n.args]),
                      n.axes)


def _einsum(em: Emitter, n: Node, args=None) -> Value:
    """One Einsum over the operands' values as they are, summing what the result lacks; the
    result in the order its reader prefers (`Emitter.prefer`)."""
    vals = [em.complete(a) for a in (args or n.args)]
    table: dict[str, str] = {}
    dims = {d.name for v in vals for d in v.dims} | set(n.axes.names)
    if len(dims) > len(string.ascii_letters):
        raise OnnxError(f"cannot export {n!r}: more axes than Einsum letters")

    def letters(axes):
        for ax in axes:
            table.setdefault(ax.name, string.ascii_letters[len(table)])
        return "".join(table[ax.name] for ax in axes)

    out = em.prefer.get(n, tuple(n.axes))
    eq = f"{letters(vals[0].dims)},{letters(vals[1].dims)}->{letters(out)}"
    return full_value(em.node("Einsum", [em.name_of(v) for v in vals], equation=eq), out)


def _through_views(node: Node) -> Node:
    while node.op in ("Broadcast", "ReorderAxes"):
        node = node.args[0]
    return node


def batched_product(em: Emitter, n: Node) -> Value | None:
    """Sum over one axis k of a product of two broadcast operands (the importer's batched
    MatMul): a MatMul where both values end in (m, k) and (k, j) after the same batch
    dimensions, else one Einsum."""
    red = n.attrs["reduction_axes"]
    product = n.args[0]
    if len(red) != 1 or product.op != "Multiply" or not em.single_use(product):
        return None
    a, b = (_through_views(x) for x in product.args)
    if red[0] not in a.axes or red[0] not in b.axes or a.dtype != b.dtype:
        return None
    va, vb = em.values[a], em.values[b]
    k = red[0]
    if (va.has_all(a.axes) and vb.has_all(b.axes) and len(va.dims) == len(vb.dims) >= 2
            and va.dims[-1] == k and vb.dims[-2] == k and va.dims[:-2] == vb.dims[:-2]
            and va.dims[-2] not in b.axes and vb.dims[-1] not in a.axes):
        y = em.node("MatMul", [em.name_of(va), em.name_of(vb)])
        dims = va.dims[:-1] + vb.dims[-1:]
        return Value(dims, va.shape[:-1] + vb.shape[-1:], y)
    return _einsum(em, n, (a, b))


@layout_exporter("Sum")
def _sum(em: Emitter, n: Node) -> Value:
    return batched_product(em, n) or reduction(em, n)


# -- windows -----------------------------------------------------------------------------------
def _spatial(n: Node, x: Node, out_first: int, pads) -> list[int]:
    """The spatial positions (of 3) to write: those not all length 1 and unpadded."""
    keep = [i for i in range(3) if x.axes[1 + i].length > 1 or n.axes[1 + i].length > 1
            or pads[i] or n.args[-1].axes[1 + i].length > 1]
    return keep or [2]


def _window_attrs(n: Node, keep) -> dict:
    pads = [int(n.attrs["padding"][i]) for i in keep]
    return {"pads": pads + pads, "strides": [int(n.attrs["strides"][i]) for i in keep]}


@layout_exporter("Convolution")
def _convolution(em: Emitter, n: Node) -> Value:
    x, w = n.args
    keep = _spatial(n, x, 0, n.attrs["padding"])
    xname = em.exact(x, (x.axes[4], x.axes[0], *(x.axes[1 + i] for i in keep)))
    wname = em.exact(w, (w.axes[4], w.axes[0], *(w.axes[1 + i] for i in keep)))
    y = em.node("Conv", [xname, wname], dilations=[int(n.attrs["dilation"][i]) for i in keep],
                **_window_attrs(n, keep))
    em.biasable[y] = ("Conv", len(em.nodes) - 1)
    return full_value(y, (n.axes[4], n.axes[0], *(n.axes[1 + i] for i in keep)))


@layout_exporter("Pooling")
def _pooling(em: Emitter, n: Node) -> Value:
    (x,) = n.args
    keep = [i for i in range(3) if x.axes[1 + i].length > 1 or n.axes[1 + i].length > 1
            or n.attrs["padding"][i] or n.attrs["window"][i] > 1] or [2]
    xname = em.exact(x, (x.axes[4], x.axes[0], *(x.axes[1 + i] for i in keep)))
    attrs = dict(kernel_shape=[int(n.attrs["window"][i]) for i in keep], **_window_attrs(n, keep))
    if n.attrs["mode"] == "max":
        y = em.node("MaxPool", [xname], **attrs)
    else:
        y = em.node("AveragePool", [xname], count_include_pad=1, **attrs)
    return full_value(y, (n.axes[4], n.axes[0], *(n.axes[1 + i] for i in keep)))


# -- recognising the importer's forms ----------------------------------------------------------
def _parts(node: Node, *ops: str):
    """node's arguments when its op is one of `ops` (else a LookupError ends the match)."""
    if node.op not in ops:
        raise LookupError(node.op)
    return node.args


def _scalar(node: Node) -> float:
    while node.op == "Broadcast":
        node = node.args[0]
    value = np.asarray(node.attrs["value"]) if node.op == "Constant" else None
    if value is None or value.size != 1:
        raise LookupError("not a scalar constant")
    return float(value.reshape(()))


def _normalisation(n: Node):
    """(x, centre, var, eps, scale, bias) of `(x - centre) * 1/sqrt(var + eps) [* scale]
    [+ bias]`, the shape of both batchnorm's and layer norm's imported forms (a scale of 1 or
    a bias of 0 may have been simplified away: None)."""
    node, scale_b, bias_b = n, None, None
    if node.op == "Add":
        node, bias_b = node.args
    if node.op == "Multiply" and node.args[0].op == "Multiply":
        node, scale_b = node.args
    centred, inv_b = _parts(node, "Multiply")
    x, centre_b = _parts(centred, "Subtract")
    (sqrt,) = _parts(_parts(inv_b, "Broadcast")[0], "Reciprocal")
    var, eps_b = _parts(_parts(sqrt, "Sqrt")[0], "Add")
    return x, _parts(centre_b, "Broadcast")[0], var, _scalar(eps_b), scale_b, bias_b


def _is_form(n: Node, core: Node, scale_b, bias_b) -> bool:
    """Whether n is `core [* scale_b] [+ bias_b]` (one node, by hash-consing)."""
    form = core if scale_b is None else core * scale_b
    return (form if bias_b is None else form + bias_b) is n


def _param(em: Emitter, b, axis, fill: float, dtype) -> str:
    """A per-channel parameter under its broadcast, or `fill` where it was simplified away."""
    if b is None:
        return em.const(np.full(axis.length, fill, dtype), dtype=dtype)
    return em.exact(b.args[0], (axis,))


def _batchnorm(em: Emitter, n: Node) -> Value | None:
    x, mean, var, eps, scale_b, bias_b = _normalisation(n)
    if not _is_form(n, (x - mean) * F.reciprocal(F.sqrt(var + eps)), scale_b, bias_b):
        return None
    (channel,) = mean.axes
    vx = em.values[x]
    params = [b.args[0] for b in (scale_b, bias_b) if b is not None and b.op == "Broadcast"]
    if len(params) != (scale_b is not None) + (bias_b is not None):
        return None
    if any(len(p.axes) != 1 or p.axes[0] != channel for p in (mean, var, *params)):
        return None
    if len(vx.dims) < 2 or vx.dims[1] != channel or not vx.has_all(x.axes):
        return None
    names = [_param(em, scale_b, channel, 1.0, x.dtype), _param(em, bias_b, channel, 0.0,
                                                                x.dtype),
             em.exact(mean, (channel,)), em.exact(var, (channel,))]
    y = em.node("BatchNormalization", [em.name_of(vx), *names], epsilon=eps)
    return Value(vx.dims, vx.shape, y)


def _layernorm(em: Emitter, n: Node) -> Value | None:
    x, mean, var, eps, scale_b, bias_b = _normalisation(n)
    kept = mean.axes
    core = (x - F.mean(x, out_axes=kept)) * F.reciprocal(
        F.sqrt(F.variance(x, out_axes=kept) + eps))
    if not _is_form(n, core, scale_b, bias_b):
        return None
    gamma, beta = (b.args[0] if b is not None and b.op == "Broadcast" else b
                   for b in (scale_b, bias_b))
    return layer_normalization(em, n, x, gamma, beta, x.axes - kept, eps)


def layer_normalization(em: Emitter, n, x, gamma, beta, red, eps) -> Value | None:
    """LayerNormalization over `red`, put last; gamma and beta over exactly those axes (or
    None: a scale of ones, no bias)."""
    if any(p is not None and (not p.axes.is_equal_set(red) or len(p.axes) != len(red))
           for p in (gamma, beta)):
        return None
    vx = em.complete(x)
    inner = tuple(d for d in vx.dims if d in red)
    if vx.dims[len(vx.dims) - len(red):] != inner:
        outer = tuple(a for a in x.axes if a not in red)
        vx = full_value(em.exact(x, outer + inner), outer + inner)
    shape = [a.length for a in inner]
    scale = (em.exact(gamma, inner) if gamma is not None
             else em.const(np.ones(shape, x.dtype), dtype=x.dtype))
    params = [scale] + ([em.exact(beta, inner)] if beta is not None else [])
    y = em.node("LayerNormalization", [em.name_of(vx), *params],
                axis=len(vx.dims) - len(red), epsilon=eps)
    return Value(vx.dims, vx.shape, y)


def _gelu_form(n: Node) -> str | None:
    """'tanh' or 'none' when n is the importer's GELU (either form) of its x."""
    from ngrules.ir import layers

    try:
        half_x, _ = _parts(n, "Multiply")
        _, x = _parts(half_x, "Multiply")
    except LookupError:
        return None
    if layers.gelu(x) is n:
        return "tanh"
    return "none" if layers.gelu_erf(x) is n else None


def gelu(em: Emitter, x: Node, approximate: str) -> Value:
    """ONNX Gelu from opset 20, before it a function of the ngrules domain with its body."""
    v = em.values[x]
    if em.opset >= 20:
        return Value(v.dims, v.shape, em.node("Gelu", [em.name_of(v)], approximate=approximate))
    from ngrules.interop.onnx.functions import DOMAIN

    op = "GeluTanh" if approximate == "tanh" else "Gelu"
    em.functions.add(op)
    return Value(v.dims, v.shape, em.node(op, [em.name_of(v)], domain=DOMAIN))


# -- the roots of those forms ------------------------------------------------------------------
def _bias(em: Emitter, n: Node) -> Value | None:
    """A tensor added to a Conv (per output channel) or a 2-D MatMul read only here: its
    bias input (Gemm's C)."""
    for prod, other in ((n.args[0], n.args[1]), (n.args[1], n.args[0])):
        v, vo = em.values[prod], em.values[other]
        if v.name not in em.biasable or not _only_reader(em, prod, v.name):
            continue
        kind, index = em.biasable.pop(v.name)
        onnx_node = em.nodes[index]
        if kind == "Conv":
            present = [d for d, s in zip(vo.dims, vo.shape) if s > 1]
            if present != [v.dims[1]] or other.dtype != n.dtype:
                em.biasable[v.name] = (kind, index)
                continue
            onnx_node.input.append(em.exact(_through_views(other), (v.dims[1],)))
        else:
            bias = em.aligned(other, v.dims)
            gemm = em.helper.make_node("Gemm", [*onnx_node.input, bias], list(onnx_node.output))
            gemm.attribute.extend(onnx_node.attribute)  # transA, transB of a Gemm
            em.nodes[index] = gemm
        return v
    return None


def _only_reader(em: Emitter, node: Node, name: str) -> bool:
    """Whether node (through free views of one reader each) is a product read only once."""
    while em.single_use(node) and em.values[node].name == name:
        if node.op in ("Dot", "DotLowDimension", "Convolution"):
            return True
        if node.op not in _VIEWS:
            return False
        node = node.args[0]
    return False


def _first(em: Emitter, n: Node, *tries) -> Value | None:
    for attempt in tries:
        try:
            v = attempt(em, n)
        except (LookupError, KeyError, ValueError):
            v = None
        if v is not None:
            return v
    return None


@layout_exporter("Add")
def _add(em: Emitter, n: Node) -> Value:
    return _first(em, n, _batchnorm, _layernorm, _bias) or broadcast_result(em, n, "Add",
                                                                             cast=True)


@layout_exporter("Multiply")
def _multiply(em: Emitter, n: Node) -> Value:
    """GELU in the importer's forms; x * x * x (the importer's Pow(x, 3)) as that Pow."""
    form = _gelu_form(n)
    if form is not None:
        return gelu(em, n.args[0].args[1], form)
    normalised = _first(em, n, _batchnorm, _layernorm)
    if normalised is not None:
        return normalised
    inner, x = n.args
    if inner.op == "Multiply" and inner.args == (x, x) and em.single_use(inner):
        v = em.values[x]
        three = em.const(np.array(3, dtype=x.dtype), dtype=x.dtype)
        return Value(v.dims, v.shape, em.node("Pow", [em.name_of(v), three]))
    return broadcast_result(em, n, "Mul", cast=True)


@layout_exporter("Divide")
def _divide(em: Emitter, n: Node) -> Value:
    """mean(x) as the importer writes it (Sum / count) is a ReduceMean."""
    total = n.args[0]
    if total.op == "Sum" and F.mean(total.args[0], out_axes=total.axes) is n:
        return reduce(em, "ReduceMean", total.args[0], total.attrs["reduction_axes"])
    return broadcast_result(em, n, "Div", cast=True)


@layout_exporter("Subtract")
def _subtract(em: Emitter, n: Node) -> Value:
    """x - max - log(sum(exp(x - max))) (the importer's LogSoftmax) over one axis."""
    from ngrules.interop.onnx.converters.nn import log_softmax_form

    shifted = n.args[0]
    if shifted.op == "Subtract" and shifted.args[1].op == "Broadcast":
        top = shifted.args[1].args[0]
        red = list(top.attrs.get("reduction_axes", ())) if top.op == "Max" else []
        x = shifted.args[0]
        if len(red) == 1 and log_softmax_form(x, red) is n:
            v = em.complete(x, red)
            y = em.node("LogSoftmax", [em.name_of(v)], axis=v.dims.index(red[0]))
            return Value(v.dims, v.shape, y)
    return broadcast_result(em, n, "Sub", cast=True)


@layout_exporter("Minimum")
def _minimum(em: Emitter, n: Node) -> Value:
    """min(max(x, lo), hi) with scalar bounds (the importer's Clip) as Clip."""
    low, hi = n.args
    bounds = [_through_views(b) for b in (low.args[1] if low.op == "Maximum" else low, hi)]
    if (low.op == "Maximum" and em.single_use(low) and all(not b.axes for b in bounds)
            and all(b.dtype == n.dtype for b in bounds)):
        v = em.values[low.args[0]]
        if v.has_all(n.axes):
            y = em.node("Clip", [em.name_of(v), *(em.exact(b, ()) for b in bounds)])
            return Value(v.dims, v.shape, y)
    return broadcast_result(em, n, "Min", cast=True)


@layout_exporter("LayerNorm")
def _declared_layer_norm(em: Emitter, n: Node) -> Value:
    """nn.rules' LayerNorm(x, gamma, beta; axes, eps)."""
    x, gamma, beta = n.args
    v = layer_normalization(em, n, x, gamma, beta, Axes(n.attrs["axes"]), float(n.attrs["eps"]))
    if v is None:
        raise OnnxError(f"cannot export {n!r}: gamma and beta must have the normalised axes")
    return v


@layout_exporter("Gelu")
def _declared_gelu(em: Emitter, n: Node) -> Value:
    """nn.rules' Gelu (the tanh form)."""
    return gelu(em, n.args[0], "tanh")


#: Imported by the exporter, which needs these ops registered.
LOADED = True
