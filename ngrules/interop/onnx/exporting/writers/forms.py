"""The importer's primitive forms written back as the ONNX ops they came from.

BatchNormalization (inference), LayerNormalization, Gelu, LogSoftmax, ReduceMean and Clip come
in as primitives; a node is recognised by building the importer's form again from the leaves
it seems to have and checking that the result is that very node (hash-consing makes equal
graphs one node), so a form that only looks similar is left alone. A scale of 1 or a bias of 0
that simplify took away is allowed for. The fused ops nn.rules declares (`LayerNorm`,
`SkipLayerNorm`, `Gelu`) are written as their standard twins.
"""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx import OnnxError
from ngrules.interop.onnx.exporting.emitter import Emitter, layout_exporter
from ngrules.interop.onnx.exporting.layout import Value, full_value
from ngrules.interop.onnx.exporting.writers.attention import attention_op
from ngrules.interop.onnx.exporting.writers.elementwise import broadcast_result, reduce, relu
from ngrules.interop.onnx.exporting.writers.products import fold_bias, through_views
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes
from ngrules.ir.graph import Node, make_node, toposort
from ngrules.ir.values import constant_value


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
    x, centre, inv, scale_b, bias_b = _centred_scaled(n)
    (sqrt,) = _parts(inv, "Reciprocal")
    var, eps_b = _parts(_parts(sqrt, "Sqrt")[0], "Add")
    return x, centre, var, _scalar(eps_b), scale_b, bias_b


def _centred_scaled(n: Node):
    """(x, centre, spread, scale, bias) of `(x - centre) * spread [* scale] [+ bias]`, the
    centre and spread under their broadcasts (scale and bias with theirs, or None)."""
    node, scale_b, bias_b = n, None, None
    if node.op == "Add":
        node, bias_b = node.args
    if node.op == "Multiply" and node.args[0].op == "Multiply":
        node, scale_b = node.args
    centred, spread_b = _parts(node, "Multiply")
    x, centre_b = _parts(centred, "Subtract")
    centre, spread = _parts(centre_b, "Broadcast")[0], _parts(spread_b, "Broadcast")[0]
    return x, centre, spread, scale_b, bias_b


def _is_form(n: Node, core: Node, scale_b, bias_b) -> bool:
    """Whether n is `core [* scale_b] [+ bias_b]` (one node, by hash-consing)."""
    form = core if scale_b is None else core * scale_b
    return (form if bias_b is None else form + bias_b) is n


def _param(em: Emitter, b, axis, fill: float, dtype) -> str:
    """A per-channel parameter under its broadcast, an array of its values, or `fill` where
    it was simplified away."""
    if b is None:
        return em.const(np.full(axis.length, fill, dtype), dtype=dtype)
    if isinstance(b, np.ndarray):
        return em.const(b.astype(dtype), dtype=dtype)
    return em.exact(b.args[0], (axis,))


def _batchnorm(em: Emitter, n: Node) -> Value | None:
    x, mean, var, eps, scale_b, bias_b = _normalisation(n)
    if not _is_form(n, (x - mean) * F.reciprocal(F.sqrt(var + eps)), scale_b, bias_b):
        return None
    return _batch_normalization(em, x, (mean, var), scale_b, bias_b, eps)


def _folded_batchnorm(em: Emitter, n: Node) -> Value | None:
    """`(x - μ)·k [·γ] [+ β]`, k and γ per-channel constants: what `fold_constants` leaves of
    a batchnorm that no convolution precedes (k = 1/√(σ² + ε) evaluated). Written as
    BatchNormalization with scale k·γ, variance 1 and epsilon 0 (`(x - μ)·k·γ/√1 + β`): one
    node, as it came in, where Sub, Mul and Add would be three."""
    x, mean, k, gamma_b, bias_b = _centred_scaled(n)
    if k.op != "Constant" or not _is_form(n, (x - mean) * k, gamma_b, bias_b):
        return None
    scale = constant_value(k)
    if gamma_b is not None:
        gamma = constant_value(_parts(gamma_b, "Broadcast")[0])
        if gamma is None or gamma.shape != scale.shape:
            return None
        scale = scale * gamma
    return _batch_normalization(em, x, (mean,), scale, bias_b, 0.0)


def _batch_normalization(em: Emitter, x, stats, scale, bias_b, eps) -> Value | None:
    """BatchNormalization of x over its second dimension: the statistics (mean and variance,
    or the mean alone: a variance of 1), the broadcast bias and the scale (broadcast, or an
    array of its values; None: 1 and 0) all per channel; None where they are not."""
    mean = stats[0]
    (channel,) = mean.axes
    vx = em.values[x]
    broadcast = [b for b in (scale, bias_b) if b is not None and not isinstance(b, np.ndarray)]
    if any(b.op != "Broadcast" for b in broadcast):
        return None
    params = [b.args[0] for b in broadcast]
    if isinstance(scale, np.ndarray) and scale.shape != (channel.length,):
        return None
    if any(len(p.axes) != 1 or p.axes[0] != channel for p in (*stats, *params)):
        return None
    if len(vx.dims) < 2 or vx.dims[1] != channel or not vx.has_all(x.axes):
        return None
    var = (em.exact(stats[1], (channel,)) if len(stats) > 1
           else em.const(np.ones(channel.length, x.dtype), dtype=x.dtype))
    names = [_param(em, scale, channel, 1.0, x.dtype), _param(em, bias_b, channel, 0.0,
                                                              x.dtype),
             em.exact(mean, (channel,)), var]
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
    return gelu_value(em, em.values[x], approximate)


def gelu_value(em: Emitter, v: Value, approximate: str) -> Value:
    if em.opset >= 20:
        return Value(v.dims, v.shape, em.node("Gelu", [em.name_of(v)], approximate=approximate))
    from ngrules.interop.onnx.exporting.functions import DOMAIN

    op = "GeluTanh" if approximate == "tanh" else "Gelu"
    em.functions.add(op)
    return Value(v.dims, v.shape, em.node(op, [em.name_of(v)], domain=DOMAIN))


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
    return _first(em, n, _batchnorm, _folded_batchnorm, _layernorm, fold_bias) or \
        broadcast_result(em, n, "Add", cast=True)


def _hard_sigmoid_form(n: Node) -> tuple[Node, float, float] | None:
    """(x, alpha, beta) when n is the importer's HardSigmoid, max(min(alpha x + beta, 1), 0)
    (alpha x written either way round; the max as the Relu relu_plain makes of it)."""
    try:
        if n.op == "Relu":
            low = n.args[0]
        else:
            low, zero = _parts(n, "Maximum")
            if _scalar(zero) != 0.0:
                return None
        linear, one = _parts(low, "Minimum")
        scaled, beta_b = _parts(linear, "Add")
        first, second = _parts(scaled, "Multiply")
        x, alpha_b = (second, first) if first.op == "Broadcast" else (first, second)
        alpha, beta = _scalar(alpha_b), _scalar(beta_b)
        if _scalar(one) != 1.0:
            return None
    except LookupError:
        return None
    for product in (alpha * x, x * alpha):
        clamped = F.minimum(product + beta, 1.0)
        if F.maximum(clamped, 0.0) is n or make_node("Relu", (clamped,), slope=0.0) is n:
            return x, alpha, beta
    return None


@layout_exporter("Maximum", "Relu")
def _maximum(em: Emitter, n: Node) -> Value:
    """The importer's HardSigmoid as HardSigmoid."""
    form = _hard_sigmoid_form(n)
    if form is None or form[0].dtype != n.dtype:
        return relu(em, n) if n.op == "Relu" else broadcast_result(em, n, "Max", cast=True)
    x, alpha, beta = form
    v = em.values[x]
    if not v.has_all(n.axes):
        v = em.complete(x)
    return Value(v.dims, v.shape, em.node("HardSigmoid", [em.name_of(v)], alpha=alpha,
                                          beta=beta))


def _hard_swish(em: Emitter, n: Node) -> Value | None:
    """x * HardSigmoid(x; 1/6, 1/2), the importer's HardSwish, as HardSwish."""
    x, gate = n.args
    form = _hard_sigmoid_form(gate)
    if form is None or form[0] is not x or not np.isclose(form[1], 1 / 6) or form[2] != 0.5:
        return None
    v = em.values[x]
    if not v.has_all(n.axes):
        return None
    return Value(v.dims, v.shape, em.node("HardSwish", [em.name_of(v)]))


@layout_exporter("Multiply")
def _multiply(em: Emitter, n: Node) -> Value:
    """GELU and HardSwish in the importer's forms; x * x * x (the importer's Pow(x, 3)) as
    that Pow."""
    form = _gelu_form(n)
    if form is not None:
        return gelu(em, n.args[0].args[1], form)
    swish = _hard_swish(em, n)
    if swish is not None:
        return swish
    normalised = _first(em, n, _batchnorm, _folded_batchnorm, _layernorm)
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
        return reduce(em, "ReduceMean", total.args[0], total.attrs["reduction_axes"],
                      keepdims=int(n in em.window_read))
    return broadcast_result(em, n, "Div", cast=True)


@layout_exporter("Subtract")
def _subtract(em: Emitter, n: Node) -> Value:
    """x - max - log(sum(exp(x - max))) (the importer's LogSoftmax) over one axis."""
    from ngrules.interop.onnx.importing.converters.nn import log_softmax_form

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
    bounds = [through_views(b) for b in (low.args[1] if low.op == "Maximum" else low, hi)]
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


@layout_exporter("SkipLayerNorm")
def _declared_skip_layer_norm(em: Emitter, n: Node) -> Value:
    """nn.rules' SkipLayerNorm(x, skip, gamma, beta): the sum, shared with the graph's own
    `x + skip` where the residual reads it too, then LayerNormalization."""
    x, skip, gamma, beta = n.args
    total = x + skip
    if total not in em.values:
        em.values[total] = _add(em, total)
    v = layer_normalization(em, n, total, gamma, beta, Axes(n.attrs["axes"]),
                            float(n.attrs["eps"]))
    if v is None:
        raise OnnxError(f"cannot export {n!r}: gamma and beta must have the normalised axes")
    return v


@layout_exporter("GeluErf", "BiasGeluErf")
def _declared_gelu_erf(em: Emitter, n: Node) -> Value:
    """nn.rules' GeluErf(x), BiasGeluErf(x, b): the bias added (broadcast by ONNX), then Gelu."""
    x = n.args[0]
    if n.op == "BiasGeluErf":
        (x,) = em.write([x + F.broadcast(n.args[1], x.axes)])
    else:
        x = em.values[x]
    return gelu_value(em, x, "none")


@layout_exporter("DotProductAttention", "MaskedDotProductAttention")
def _declared_attention(em: Emitter, n: Node) -> Value:
    """nn.rules' attention ops: ONNX's Attention from opset 23 where it computes them
    (`attention`), else their bodies on their arguments, written like the rest of the
    graph (MatMul or Einsum, Softmax with its axis): no reordering of the operands."""
    from ngrules.ir import declared

    v = attention_op(em, n)
    if v is not None:
        return v

    stand_ins, outputs = declared.DECLARATIONS[n.op].body(n)
    memo = dict(zip(stand_ins, n.args))
    for node in toposort(outputs):
        if node not in memo:
            memo[node] = node.with_args(tuple(memo.get(a, a) for a in node.args))
    (v,) = em.write([memo[outputs[0]]])
    return v


@layout_exporter("Gelu")
def _declared_gelu(em: Emitter, n: Node) -> Value:
    """nn.rules' Gelu (the tanh form)."""
    return gelu(em, n.args[0], "tanh")


#: Imported by the exporter, which needs these ops registered.
LOADED = True
