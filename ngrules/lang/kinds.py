"""Kinds a typed variable may name besides an op: every op trait, plus `scalar` and `constant`.

`x: elementwise` binds a node whose op has that trait; `x: scalar` a node with no axes;
`x: constant` a node whose values are known (a Constant, possibly under views).
"""

from __future__ import annotations

from collections.abc import Callable

from ngrules.ir.graph import Node
from ngrules.ir.ops import OPS, TRAITS
from ngrules.ir.values import constant_value


def _has_trait(trait: str) -> Callable[[Node], bool]:
    def test(node: Node) -> bool:
        op = OPS.get(node.op)
        return op is not None and trait in op.traits

    test.__doc__ = f"the node's op has the {trait!r} trait"
    return test


def is_scalar(node: Node) -> bool:
    """A single-output node with no axes."""
    return node.outputs is None and len(node.axes) == 0


def is_constant(node: Node) -> bool:
    """A node whose values are known when rules are applied (through views)."""
    return constant_value(node) is not None


KINDS: dict[str, Callable[[Node], bool]] = {t: _has_trait(t) for t in sorted(TRAITS)}
KINDS["scalar"] = is_scalar
KINDS["constant"] = is_constant

