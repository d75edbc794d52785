"""Known constant values of nodes, looking through views (so literals match by value)."""

from __future__ import annotations

import numpy as np

from ngrules.ir.graph import UNKNOWN, Node
from ngrules.ir.ops import OPS


def constant_source(node: Node) -> Node | None:
    """The Constant under any chain of views (ops with the `view` trait, which move values
    without changing them), or None if the node is not a known constant. An op no longer
    registered (a composite of a model imported earlier) is no view."""
    while (spec := OPS.get(node.op)) is not None and spec.has("view"):
        node = node.args[0]
    return node if node.op == "Constant" else None


def constant_value(node: Node) -> np.ndarray | None:
    """The constant array the node's values come from (through views), or None."""
    source = constant_source(node)
    return None if source is None else source.attrs["value"]


def scalar_value(node: Node) -> float | None:
    """The one value a known constant holds everywhere, or None if it is not uniform."""
    value = constant_value(node)
    if value is None or value.size == 0:
        return None
    first = value.flat[0]
    if value.size > 1:  # two elements first: a weight is told from a fill without a pass
        if value.flat[-1] != first or value.flat[value.size // 2] != first:
            return None
        if not np.all(value == first):
            return None
    return float(first)


def known_scalar(node: Node) -> float | None:
    """`scalar_value`, computed once per node and kept on it (constants never change)."""
    value = node._scalar
    if value is UNKNOWN:
        value = scalar_value(node)
        object.__setattr__(node, "_scalar", value)
    return value
