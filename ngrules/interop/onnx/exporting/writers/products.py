"""Products and windows written as the ONNX op they came from.

`Dot` is a MatMul where the operands' orders allow it (a Gemm when a bias is added to it), else
one Einsum; dot lowering's `DotLowDimension` one MatMul or Gemm with its operands in the orders
they have; the importer's batched MatMul (a product summed over one axis) a MatMul or Einsum;
Convolution and Pooling are Conv and MaxPool/AveragePool in NCHW, a bias added to a Conv its
third input (`fold_bias`, which the Add writer calls).
"""

from __future__ import annotations

import string

from ngrules.interop.onnx import OnnxError, proto
from ngrules.interop.onnx.exporting.emitter import Emitter, layout_exporter
from ngrules.interop.onnx.exporting.layout import Value, full_value
from ngrules.interop.onnx.exporting.writers.elementwise import reduction, regroup
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
    if len(vx.dims) == 2 and vw.array is not None and vw.dims == (j, k) and vw.shape == (
            j.length, k.length):  # a weight stored [j, k]: Gemm reads it so, uncopied
        out = em.node("Gemm", [em.name_of(vx), em.name_of(vw)], transB=1)
    else:
        out = em.node("MatMul", [em.name_of(vx), em.exact(w, (k, j))])
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
        if v.dims and v.dims[-1] == k:  # the contracted axes already merged in x's value
            k0 = (k,)
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
    from ngrules.interop.onnx.exporting.writers.positional import POSITIONAL

    return full_value(POSITIONAL["DotLowDimension"](em, n, [em.exact(a) for a in n.args]),
                      n.axes)


def _einsum(em: Emitter, n: Node, args=None) -> Value:
    """One Einsum over the operands' values as they are, summing what the result lacks; the
    result in the order its reader prefers (`Emitter.prefer`)."""
    args = args or n.args
    vals = [em.complete(a) for a in args]
    table: dict[str, str] = {}
    if sum(len(v.dims) for v in vals) + len(n.axes) > len(string.ascii_letters):
        raise OnnxError(f"cannot export {n!r}: more axes than Einsum letters")

    def letters(axes, own):
        """A letter per axis name; a length-1 dimension its node does not have (a reduced
        one kept) gets its own letter, summed away."""
        keys = [ax.name if ax in own else f"unit {i} {id(own)}" for i, ax in enumerate(axes)]
        for key in keys:
            table.setdefault(key, string.ascii_letters[len(table)])
        return "".join(table[key] for key in keys)

    held = set(args[0].axes) | set(args[1].axes)
    # an axis no operand holds (the product was broadcast along it) stays a broadcast
    out = tuple(a for a in em.prefer.get(n, tuple(n.axes)) if a in held)
    eq = (f"{letters(vals[0].dims, args[0].axes)},{letters(vals[1].dims, args[1].axes)}"
          f"->{letters(out, n.axes)}")
    return full_value(em.node("Einsum", [em.name_of(v) for v in vals], equation=eq), out)


def through_views(node: Node) -> Node:
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
    a, b = (through_views(x) for x in product.args)
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
    return _transposed_matmul(em, n, a, b, k) or _einsum(em, n, (a, b))


def _transposed_matmul(em: Emitter, n: Node, a: Node, b: Node, k) -> Value | None:
    """A batched product of one row axis by one column axis as MatMul over operands put in
    (batch..., m, k) and (batch..., k, j) order: onnxruntime fuses those Transposes into its
    MatMul, where its Einsum is several times slower."""
    va, vb = em.values[a], em.values[b]
    rows, cols = a.axes - b.axes, b.axes - a.axes
    batch = tuple(d for d in va.dims if d in b.axes and d != k)
    if (len(rows) != 1 or len(cols) != 1 or not va.has_all(a.axes) or not vb.has_all(b.axes)
            or len(batch) + 2 != len(a.axes) or not set(batch) <= set(n.axes)):
        return None
    (m,), (j,) = rows, cols
    y = em.node("MatMul", [em.exact(a, batch + (m, k)), em.exact(b, batch + (k, j))])
    return full_value(y, batch + (m, j))


@layout_exporter("Sum")
def _sum(em: Emitter, n: Node) -> Value:
    return batched_product(em, n) or reduction(em, n)


# -- windows -----------------------------------------------------------------------------------
def _spatial(em: Emitter, n: Node, x: Node, pads) -> list[int]:
    """The spatial positions (of 3) to write: those not all length 1 and unpadded, and as
    many more (from the last) as x's value has dimensions for (so it is read as it is)."""
    keep = [i for i in range(3) if x.axes[1 + i].length > 1 or n.axes[1 + i].length > 1
            or pads[i] or n.args[-1].axes[1 + i].length > 1]
    return _in_rank(em, x, keep)


def _in_rank(em: Emitter, x: Node, keep: list[int]) -> list[int]:
    """`keep` with unit positions added from the last until x's value has a dimension for
    each (so [N, C, 1, 1] is read as it is, not reshaped to [N, C, 1])."""
    rank = min(max(len(em.values[x].dims) - 2, 1), 3)
    for i in (2, 1, 0):
        if len(keep) < rank and i not in keep:
            keep.append(i)
    return sorted(keep)


def _window_attrs(n: Node, keep) -> dict:
    pads = [int(n.attrs["padding"][i]) for i in keep]
    return {"pads": pads + pads, "strides": [int(n.attrs["strides"][i]) for i in keep]}


@layout_exporter("Convolution")
def _convolution(em: Emitter, n: Node) -> Value:
    x, w = n.args
    keep = _spatial(em, n, x, n.attrs["padding"])
    xname = em.exact(x, (x.axes[4], x.axes[0], *(x.axes[1 + i] for i in keep)))
    wname = em.exact(w, (w.axes[4], w.axes[0], *(w.axes[1 + i] for i in keep)))
    y = em.node("Conv", [xname, wname], dilations=[int(n.attrs["dilation"][i]) for i in keep],
                group=n.attrs["groups"], **_window_attrs(n, keep))
    em.biasable[y] = ("Conv", len(em.nodes) - 1)
    return full_value(y, (n.axes[4], n.axes[0], *(n.axes[1 + i] for i in keep)))


@layout_exporter("Pooling")
def _pooling(em: Emitter, n: Node) -> Value:
    (x,) = n.args
    keep = _in_rank(em, x, [i for i in range(3) if x.axes[1 + i].length > 1
                            or n.axes[1 + i].length > 1 or n.attrs["padding"][i]
                            or n.attrs["window"][i] > 1])
    xname = em.exact(x, (x.axes[4], x.axes[0], *(x.axes[1 + i] for i in keep)))
    attrs = dict(kernel_shape=[int(n.attrs["window"][i]) for i in keep], **_window_attrs(n, keep))
    if n.attrs["mode"] == "max":
        y = em.node("MaxPool", [xname], **attrs)
    else:
        y = em.node("AveragePool", [xname], count_include_pad=1, **attrs)
    return full_value(y, (n.axes[4], n.axes[0], *(n.axes[1 + i] for i in keep)))


# -- biases -----------------------------------------------------------------------------------
def fold_bias(em: Emitter, n: Node) -> Value | None:
    """A tensor added to a Conv (per output channel) or a 2-D MatMul read only here: its
    bias input (Gemm's C)."""
    for prod, other in ((n.args[0], n.args[1]), (n.args[1], n.args[0])):
        v, vo = em.values[prod], em.values[other]
        if v.name not in em.biasable or not _only_reader(em, prod, v.name):
            continue
        kind, index = em.biasable[v.name]
        if kind == "Conv":
            present = [d for d, s in zip(vo.dims, vo.shape) if s > 1]
            if present != [v.dims[1]] or other.dtype != n.dtype:
                continue
            bias = em.exact(through_views(other), (v.dims[1],))
        else:
            bias = em.aligned(other, v.dims, rank=True)  # ONNX's C: rank 2 at most
        del em.biasable[v.name]
        _rewritten(em, index, "Gemm" if kind == "Gemm" else "Conv", bias)
        return v
    return None


def _rewritten(em: Emitter, index: int, op: str, bias: str) -> None:
    """The product at `index` written again after the bias (which may be computed after it),
    with the bias as its last input; the first one, renamed, is left for the pruning."""
    old = em.nodes[index]
    new = proto.make_node(op, [*old.input, bias], list(old.output))
    new.attribute.extend(old.attribute)  # a Conv's geometry, a Gemm's transA and transB
    old.output[0] = em.fresh("unread")
    em.nodes.append(new)


def _only_reader(em: Emitter, node: Node, name: str) -> bool:
    """Whether node (through free views of one reader each) is a product read only once."""
    while em.single_use(node) and em.values[node].name == name:
        if node.op in ("Dot", "DotLowDimension", "Convolution"):
            return True
        if node.op not in _VIEWS:
            return False
        node = node.args[0]
    return False


#: Imported by the exporter, which needs these ops registered.
LOADED = True
