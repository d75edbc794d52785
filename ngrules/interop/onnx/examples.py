"""Real models built with `onnx.helper`: an MLP with batchnorm and relu, a small CNN
(Conv-BN-ReLU-MaxPool twice, Flatten, Gemm), a small ResNet (residual Conv-BN blocks) and a
transformer encoder block (layer norm,
multi-head attention with softmax, a GELU MLP). Weights are seeded random numbers; the batch is
the symbolic dimension `N` (or `B`). The tests, `ngrules demo --onnx` and the docs use them."""

from __future__ import annotations

import numpy as np

OPSET = 17


class _Builder:
    """Nodes, initializers and fresh names for one model."""

    def __init__(self, seed: int):
        from onnx import helper, numpy_helper

        self.h, self.nh = helper, numpy_helper
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.count = 0

    def weight(self, name: str, shape, scale: float = 0.3, offset: float = 0.0) -> str:
        value = (self.rng.standard_normal(shape) * scale + offset).astype(np.float32)
        self.inits.append(self.nh.from_array(value, name))
        return name

    def positive(self, name: str, shape) -> str:
        value = self.rng.uniform(0.5, 1.5, shape).astype(np.float32)
        self.inits.append(self.nh.from_array(value, name))
        return name

    def const(self, name: str, value) -> str:
        self.inits.append(self.nh.from_array(np.asarray(value), name))
        return name

    def op(self, op: str, inputs, name: str | None = None, **attrs) -> str:
        self.count += 1
        out = name or f"{op.lower()}{self.count}"
        self.nodes.append(self.h.make_node(op, list(inputs), [out], name=f"{op}_{self.count}",
                                           **attrs))
        return out

    def model(self, name: str, inputs, output: str, out_shape):
        h = self.h
        graph = h.make_graph(self.nodes, name, inputs,
                             [h.make_tensor_value_info(output, 1, out_shape)], self.inits)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)],
                             producer_name="ngrules-examples")
        model.ir_version = 8
        return model

    def batchnorm(self, x: str, channels: int, tag: str) -> str:
        params = [self.weight(f"{tag}_scale", [channels], 0.2, 1.0),
                  self.weight(f"{tag}_bias", [channels], 0.1),
                  self.weight(f"{tag}_mean", [channels], 0.1),
                  self.positive(f"{tag}_var", [channels])]
        return self.op("BatchNormalization", [x, *params], epsilon=1e-5)


def mlp(widths=(16, 32, 32, 10), seed: int = 0):
    """x[N, 16] -> (Gemm, BatchNormalization, Relu) x 2 -> Gemm -> y[N, 10]; the Gemms
    before a batchnorm have no bias (the batchnorm's makes it redundant)."""
    b = _Builder(seed)
    h = "x"
    for i in range(1, len(widths)):
        w = b.weight(f"w{i}", [widths[i], widths[i - 1]])
        last = i == len(widths) - 1
        bias = [b.weight(f"b{i}", [widths[i]], 0.1)] if last else []  # batchnorm has a bias
        h = b.op("Gemm", [h, w, *bias], transB=1)
        if not last:
            h = b.op("Relu", [b.batchnorm(h, widths[i], f"bn{i}")])
    b.nodes[-1].output[0] = "y"
    x = b.h.make_tensor_value_info("x", 1, ["N", widths[0]])
    return b.model("mlp", [x], "y", ["N", widths[-1]])


def cnn(size: int = 16, channels=(3, 8, 16), classes: int = 10, seed: int = 1):
    """x[N, 3, 16, 16] -> (Conv 3x3, BatchNormalization, Relu, MaxPool 2x2) x 2 -> Flatten
    -> Gemm -> y[N, 10]."""
    b = _Builder(seed)
    h = "x"
    for i in range(1, len(channels)):
        w = b.weight(f"conv{i}_w", [channels[i], channels[i - 1], 3, 3])
        h = b.op("Conv", [h, w], kernel_shape=[3, 3], pads=[1, 1, 1, 1])  # no bias before BN
        h = b.op("Relu", [b.batchnorm(h, channels[i], f"bn{i}")])
        h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("Flatten", [h], axis=1)
    flat = channels[-1] * (size // 4) ** 2
    b.op("Gemm", [h, b.weight("fc_w", [classes, flat], 0.1), b.weight("fc_b", [classes])],
         name="y", transB=1)
    x = b.h.make_tensor_value_info("x", 1, ["N", channels[0], size, size])
    return b.model("cnn", [x], "y", ["N", classes])


def resnet(size: int = 16, width: int = 16, blocks: int = 2, classes: int = 10, seed: int = 3):
    """x[N, 3, 16, 16] -> Conv-BN-ReLU -> residual blocks (Conv-BN-ReLU-Conv-BN, + x, ReLU)
    -> GlobalAveragePool -> Flatten -> Gemm -> y[N, 10]: ResNet's pattern, small."""
    b = _Builder(seed)

    def conv_bn(x: str, c_in: int, tag: str) -> str:
        w = b.weight(f"{tag}_w", [width, c_in, 3, 3], 0.2)
        return b.batchnorm(b.op("Conv", [x, w], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                           width, f"{tag}_bn")

    h = b.op("Relu", [conv_bn("x", 3, "stem")])
    for i in range(blocks):
        inner = b.op("Relu", [conv_bn(h, width, f"b{i}a")])
        h = b.op("Relu", [b.op("Add", [conv_bn(inner, width, f"b{i}b"), h])])
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    b.op("Gemm", [h, b.weight("fc_w", [classes, width], 0.2), b.weight("fc_b", [classes])],
         name="y", transB=1)
    x = b.h.make_tensor_value_info("x", 1, ["N", 3, size, size])
    return b.model("resnet", [x], "y", ["N", classes])


def _layernorm(b: _Builder, x: str, width: int, tag: str) -> str:
    scale = b.weight(f"{tag}_scale", [width], 0.1, 1.0)
    return b.op("LayerNormalization", [x, scale, b.weight(f"{tag}_bias", [width], 0.1)],
                axis=-1, epsilon=1e-5)


def _linear(b: _Builder, x: str, fan_in: int, fan_out: int, tag: str) -> str:
    w = b.weight(f"{tag}_w", [fan_in, fan_out], fan_in ** -0.5)
    return b.op("Add", [b.op("MatMul", [x, w]), b.weight(f"{tag}_b", [fan_out], 0.1)])


def _attention(b: _Builder, x: str, seq: int, width: int, heads: int) -> str:
    d = width // heads
    split = b.const("split_heads", np.array([0, seq, heads, d], dtype=np.int64))
    merge = b.const("merge_heads", np.array([0, seq, width], dtype=np.int64))
    q, k, v = (b.op("Reshape", [_linear(b, x, width, width, t), split]) for t in "qkv")
    q = b.op("Transpose", [q], perm=[0, 2, 1, 3])
    k = b.op("Transpose", [k], perm=[0, 2, 3, 1])
    v = b.op("Transpose", [v], perm=[0, 2, 1, 3])
    scores = b.op("Mul", [b.op("MatMul", [q, k]), b.const("scale", np.float32(d ** -0.5))])
    probs = b.op("Softmax", [scores], axis=-1)
    context = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    return _linear(b, b.op("Reshape", [context, merge]), width, width, "o")


def _gelu(b: _Builder, x: str) -> str:
    """The tanh form, as exporters write it: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    cube = b.op("Pow", [x, b.const("three", np.float32(3.0))])
    inner = b.op("Add", [x, b.op("Mul", [cube, b.const("c", np.float32(0.044715))])])
    t = b.op("Tanh", [b.op("Mul", [inner, b.const("k", np.float32(0.7978845608028654))])])
    half = b.op("Mul", [x, b.const("half", np.float32(0.5))])
    return b.op("Mul", [half, b.op("Add", [t, b.const("one", np.float32(1.0))])])


def transformer(seq: int = 8, width: int = 16, heads: int = 2, seed: int = 2):
    """A pre-norm encoder block: x + attention(LN(x)), then + MLP(LN(.)) with GELU."""
    b = _Builder(seed)
    x1 = b.op("Add", ["x", _attention(b, _layernorm(b, "x", width, "ln1"), seq, width, heads)])
    hidden = _gelu(b, _linear(b, _layernorm(b, x1, width, "ln2"), width, 4 * width, "fc1"))
    b.op("Add", [x1, _linear(b, hidden, 4 * width, width, "fc2")], name="y")
    x = b.h.make_tensor_value_info("x", 1, ["B", seq, width])
    return b.model("transformer", [x], "y", ["B", seq, width])


MODELS = {"mlp": (mlp, {"N": 8}), "cnn": (cnn, {"N": 4}), "transformer": (transformer, {"B": 2})}
