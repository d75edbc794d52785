"""The `onnxruntime` export target: standard ONNX nodes joined into onnxruntime's contrib ops.

`to_onnx(..., target="onnxruntime")` (`--target onnxruntime` on `apply` and `export`) writes
the model as for standard ONNX, then joins chains of nodes into the `com.microsoft` ops that
onnxruntime's CPU kernels compute in one pass (each checked against its standard form under
onnxruntime, `tests/test_onnx_ort_target.py`):

- `Conv` -> inference `BatchNormalization`, all weights constants: one `Conv` with the scaled
  weights and bias (onnxruntime folds the pair when it loads the model; written folded, the
  model has the nodes onnxruntime runs, whatever the pipeline);
- `Conv` -> `Relu`, `LeakyRelu`, `Sigmoid`, `Tanh` or `HardSigmoid`: `FusedConv`;
- `Gemm` -> the same activations: `FusedGemm`;
- `Add(a, b)` (a, b of one shape) -> `LayerNormalization` over the last axis, the sum read by
  nothing else: `SkipLayerNormalization`;
- `Add(x, bias)` -> `Gelu`: `BiasGelu`; [`Add(x, bias)` ->] tanh `Gelu`: `FastGelu`;
  `Gelu` (standard, or ngrules' function before opset 20): onnxruntime's `Gelu`.

A chain is joined only where its inner values are read by nothing else and are not outputs.
This is a peephole over the written nodes, not a rule: the joined ops have no ngrules twin (a
rule may still write any contrib op through a declared op, `op ... onnx com.microsoft.Op`).
"""

from __future__ import annotations

from ngrules.interop.onnx import proto
from ngrules.interop.onnx.exporting.passes.inferred import value_shapes
from ngrules.interop.onnx.written import (
    Weights,
    WrittenGraph,
    attribute,
    attributes,
    is_standard,
    read,
    replace,
)

TARGETS = ("onnx", "onnxruntime")
MS = "com.microsoft"

#: activation op -> the attributes FusedConv/FusedGemm read as `activation_params` (in order).
_ACTIVATIONS = {"Relu": (), "Sigmoid": (), "Tanh": (), "LeakyRelu": (("alpha", 0.01),),
                "HardSigmoid": (("alpha", 0.2), ("beta", 0.5))}


def _activation(node) -> tuple[str, list[float]] | None:
    if not is_standard(node, *_ACTIVATIONS):
        return None
    return node.op_type, [float(attribute(node, a, d)) for a, d in _ACTIVATIONS[node.op_type]]


def _activation_attrs(act: tuple[str, list[float]], params_name: str) -> dict:
    op, params = act
    if params_name == "activation_params":
        return {"activation": op, **({"activation_params": params} if params else {})}
    names = [a for a, _ in _ACTIVATIONS[op]]
    return {"activation": op, **{f"activation_{a}": p for a, p in zip(names, params)}}


def _fused_conv(g: WrittenGraph, conv, make_node) -> None:
    """Conv -> activation: one FusedConv. (Not a residual Add between them, as FusedConv's
    `Z`: onnxruntime then runs the Conv outside its NCHWc layout, 1.2x slower on ResNet.)"""
    nxt = g.only_reader(conv.output[0])
    act = _activation(nxt)
    if act is None:
        return
    attrs = attributes(conv)
    fused = make_node("FusedConv", list(conv.input), [nxt.output[0]], name=conv.name,
                      domain=MS, **attrs, **_activation_attrs(act, "activation_params"))
    replace(g, [conv, nxt], fused, at=nxt)


def _folded_batchnorm(g: WrittenGraph, conv, weights: Weights, make_node):
    """Conv -> BatchNormalization (inference) over constants: one Conv whose weights are
    scaled by s = γ/√(σ² + ε) per output channel, its bias (b − μ)·s + β; else the Conv."""
    import numpy as np

    bn = g.only_reader(conv.output[0])
    if (not is_standard(bn, "BatchNormalization") or bn.input[0] != conv.output[0]
            or len([y for y in bn.output if y]) != 1 or attribute(bn, "training_mode", 0)):
        return conv
    w = weights.value(conv.input[1])
    b = weights.value(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else 0.0
    gamma, beta, mean, var = (weights.value(x) for x in bn.input[1:5])
    if any(v is None for v in (w, b, gamma, beta, mean, var)) or w.dtype.kind != "f":
        return conv
    s = gamma / np.sqrt(var + np.float64(attribute(bn, "epsilon", 1e-5)))
    scaled = (w * s.reshape(-1, *[1] * (w.ndim - 1))).astype(w.dtype)
    bias = ((b - mean) * s + beta).astype(w.dtype)
    attrs = attributes(conv)
    folded = make_node("Conv", [conv.input[0], weights.add(scaled), weights.add(bias)],
                       [bn.output[0]], name=conv.name, **attrs)
    replace(g, [conv, bn], folded, at=bn)
    return folded


def _fused_gemm(g: WrittenGraph, gemm, make_node) -> None:
    act = _activation(g.only_reader(gemm.output[0]))
    if act is None:
        return
    nxt = g.only_reader(gemm.output[0])
    attrs = attributes(gemm)
    fused = make_node("FusedGemm", list(gemm.input), [nxt.output[0]], name=gemm.name, domain=MS,
                      **attrs, **_activation_attrs(act, "activation_"))
    replace(g, [gemm, nxt], fused, at=nxt)


def _skip_layer_norm(g: WrittenGraph, add, make_node) -> None:
    """Add(a, b) -> LayerNormalization(axis=-1) over a and b of one shape, the sum read by
    nothing else (a pre-norm block's sum, read again by the next residual, could be the op's
    4th output, but onnxruntime runs that form slower: a ViT 1.09x against 0.94x)."""
    norm = g.only_reader(add.output[0])
    norms = [norm] if is_standard(norm, "LayerNormalization") else []
    a_shape = g.shapes.get(add.input[0])
    if (len(norms) != 1 or a_shape is None or len(a_shape) not in (2, 3)
            or g.shapes.get(add.input[1]) != a_shape or len(set(add.input)) != 2):
        return
    norm = norms[0]
    if (attribute(norm, "axis", -1) not in (-1, len(a_shape) - 1) or len(norm.output) != 1
            or not all(x in g.constants for x in norm.input[1:])):
        return
    inputs = list(add.input) + list(norm.input[1:])
    fused = make_node("SkipLayerNormalization", inputs, [norm.output[0]], name=norm.name,
                      domain=MS, epsilon=float(attribute(norm, "epsilon", 1e-5)))
    replace(g, [add, norm], fused, at=norm)


def _bias_of(g: WrittenGraph, add) -> tuple[str, str] | None:
    """(x, bias) of Add(x, bias), the bias a 1-D constant as long as x's last axis."""
    for x, b in (add.input, add.input[::-1]):
        shape, bias = g.shapes.get(x), g.constants.get(b)
        if shape and bias is not None and len(bias) == 1 and shape[-1] == bias[0]:
            return x, b
    return None


def _gelu(g: WrittenGraph, gelu, make_node) -> None:
    """Gelu (standard, or ngrules' function) -> Gelu / FastGelu, a bias Add before it joined."""
    tanh = (gelu.op_type == "GeluTanh" if gelu.domain == "ngrules"
            else attribute(gelu, "approximate", b"none") in (b"tanh", "tanh"))
    src = g.producer.get(gelu.input[0])
    biased = is_standard(src, "Add") and g.only_reader(src.output[0]) is gelu
    pair = _bias_of(g, src) if biased else None
    op = "FastGelu" if tanh else "BiasGelu" if pair else "Gelu"
    inputs = list(pair) if pair else [gelu.input[0]]
    fused = make_node(op, inputs, list(gelu.output), name=gelu.name, domain=MS)
    replace(g, [src, gelu] if pair else [gelu], fused, at=gelu)


def _is_gelu(node) -> bool:
    return (node.domain == "ngrules" and node.op_type in ("Gelu", "GeluTanh")) or is_standard(
        node, "Gelu")


def for_onnxruntime(model, arrays: dict, fresh) -> None:
    """Join the model's nodes into onnxruntime's contrib ops, in place (new constants named
    by `fresh()`, a folded convolution's weights added to `arrays` where they are kept)."""
    shapes = value_shapes(model, arrays)
    constants = {t.name: tuple(t.dims) for t in model.graph.initializer}
    constants.update((name, a.shape) for name, a in arrays.items())
    outputs = {o.name for o in model.graph.output}
    g = WrittenGraph(list(model.graph.node), outputs, shapes, constants)
    weights = Weights(model, arrays, constants, fresh)
    for node in list(g.nodes):
        if id(node) in g.dropped:
            continue
        if is_standard(node, "Conv"):
            _fused_conv(g, _folded_batchnorm(g, node, weights, proto.make_node), proto.make_node)
        elif is_standard(node, "Gemm"):
            _fused_gemm(g, node, proto.make_node)
        elif is_standard(node, "Add"):
            _skip_layer_norm(g, node, proto.make_node)
    for node in list(g.nodes):
        if id(node) not in g.dropped and _is_gelu(node):
            _gelu(g, node, proto.make_node)
    kept = read(g, [n for n in g.nodes if id(n) not in g.dropped])
    del model.graph.node[:]
    model.graph.node.extend(kept)
    weights.drop_unread(kept)
    if any(n.domain == MS for n in kept):
        model.opset_import.append(proto.make_opsetid(MS, 1))
    _drop_unused_functions(model)


def _drop_unused_functions(model) -> None:
    """Functions no node calls any more (ngrules' Gelu), and the domains nothing uses."""
    functions = {(f.domain, f.name): f for f in model.functions}
    used, todo = set(), [(n.domain, n.op_type) for n in model.graph.node]
    while todo:
        key = todo.pop()
        if key not in used:
            used.add(key)
            if key in functions:
                todo.extend((n.domain, n.op_type) for n in functions[key].node)
    kept = [f for key, f in functions.items() if key in used]
    del model.functions[:]
    model.functions.extend(kept)
    domains = {d for d, _ in used} | {"", "ai.onnx"}
    imports = [o for o in model.opset_import if o.domain in domains]
    del model.opset_import[:]
    model.opset_import.extend(imports)
