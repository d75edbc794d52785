"""Layers written from primitives, as ngraph's neon front end builds them.

These are the graphs the fusion rules in `rules/` are written to recognise: the demo, the
benchmarks and the tests all build batchnorm and relu through here.
"""

from __future__ import annotations

from ngrules.ir import frontend as F
from ngrules.ir.builders import erf
from ngrules.ir.graph import Node


def _normalized(x: Node, gamma: Node, beta: Node, mean: Node, var: Node, eps: float) -> Node:
    """gamma * ((x - mean) * reciprocal(sqrt(var + eps))) + beta: the form the normalisation
    rules match (batchnorm, its inference form and layer norm all build it)."""
    return gamma * ((x - mean) * F.reciprocal(F.sqrt(var + eps))) + beta


def batchnorm(x: Node, gamma: Node, beta: Node, eps: float = 1e-3) -> Node:
    """Batch normalisation over every axis of x but the first (the channel), biased variance:
    gamma * ((x - mean) * reciprocal(sqrt(var + eps))) + beta."""
    channel = x.axes[:1]
    mean = F.mean(x, out_axes=channel)
    var = F.variance(x, out_axes=channel)
    return _normalized(x, gamma, beta, mean, var, eps)


def leaky_relu(x: Node, slope: float = 0.01) -> Node:
    """ngraph's relu as primitives: max(x, 0) + slope * min(0, x)."""
    return F.maximum(x, 0.0) + slope * F.minimum(0.0, x)


def sigmoid(x: Node) -> Node:
    """ngraph's sigmoid as primitives: reciprocal(exp(-x) + 1)."""
    return F.reciprocal(F.exp(-x) + 1.0)


def softmax(x: Node, normalization_axes) -> Node:
    """ngraph's softmax as primitives: exp(x - max(x)) / sum(exp(x - max(x)))."""
    shifted = x - F.max(x, reduction_axes=normalization_axes)
    exps = F.exp(shifted)
    return exps / F.sum(exps, reduction_axes=normalization_axes)


def layer_norm(x: Node, gamma: Node, beta: Node, axes, eps: float = 1e-5) -> Node:
    """Normalisation over `axes` (the features) of each sample, biased variance:
    gamma * ((x - mean) * reciprocal(sqrt(var + eps))) + beta."""
    mean = F.mean(x, reduction_axes=axes)
    var = F.variance(x, reduction_axes=axes)
    return _normalized(x, gamma, beta, mean, var, eps)


#: sqrt(2 / pi), the tanh form of GELU's constant.
GELU_SCALE = 0.7978845608028654


def gelu_erf(x: Node) -> Node:
    """GELU in its exact form: 0.5 * x * (1 + erf(x / sqrt(2)))."""
    return 0.5 * x * (1.0 + erf(x * 0.7071067811865476))


def gelu(x: Node) -> Node:
    """GELU in its tanh form: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    inner = GELU_SCALE * (x + 0.044715 * (x * x * x))
    return 0.5 * x * (1.0 + F.tanh(inner))


def batchnorm_inference(
    y: Node, gamma: Node, beta: Node, mean: Node, var: Node, eps: float = 1e-3
) -> Node:
    """Batch normalisation with stored statistics (inference form), per channel:
    gamma * ((y - mean) * reciprocal(sqrt(var + eps))) + beta."""
    return _normalized(y, gamma, beta, mean, var, eps)
