"""Layers written from primitives, as ngraph's neon front end builds them.

These are the graphs the fusion rules in `rules/` are written to recognise: the demo, the
benchmarks and the tests all build batchnorm and relu through here.
"""

from __future__ import annotations

from ngrules.ir import frontend as F
from ngrules.ir.graph import Node


def batchnorm(x: Node, gamma: Node, beta: Node, eps: float = 1e-3) -> Node:
    """Batch normalisation over every axis of x but the first (the channel), biased variance:
    gamma * ((x - mean) * reciprocal(sqrt(var + eps))) + beta."""
    channel = x.axes[:1]
    mean = F.mean(x, out_axes=channel)
    var = F.variance(x, out_axes=channel)
    return gamma * ((x - mean) * F.reciprocal(F.sqrt(var + eps))) + beta


def leaky_relu(x: Node, slope: float = 0.01) -> Node:
    """ngraph's relu as primitives: max(x, 0) + slope * min(0, x)."""
    return F.maximum(x, 0.0) + slope * F.minimum(0.0, x)
