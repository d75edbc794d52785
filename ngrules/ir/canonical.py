"""Layout views moved out of elementwise ops: the built-in pass `canonical_layout`.

An imported model often computes in one layout and writes in another, so its SiLU reads
`ReorderAxes(d) * ReorderAxes(Sigmoid(d))` and a rule `x * Sigmoid(x)` does not match it as
written. After this walk, an elementwise op whose operands are all the same layout view
(`ReorderAxes` to one order, or `Broadcast` to one set of axes) of nodes whose axes agree
(names, lengths and order) computes on those nodes, and the view is applied once to its
result: `ReorderAxes(d * Sigmoid(d))`. A one-operand elementwise op of a view is the view of
the op (`Sigmoid(ReorderAxes(d))` is `ReorderAxes(Sigmoid(d))`), so chains gather their views
at the top. Values never change: an elementwise op computes point by point, and a reorder or
a broadcast only moves or repeats points. Nodes the walk cannot rebuild (an op that refuses
the operands' axes) stay as they were.
"""

from __future__ import annotations

from collections.abc import Sequence

from ngrules.errors import NgrulesError
from ngrules.ir.graph import Node, creation_order, make_node
from ngrules.ir.ops import OPS

#: The name pipelines use for this pass (reserved: no rules file may declare it).
PASS_NAME = "canonical_layout"  # in lang.rules.BUILTIN_PASSES

#: The views moved: they change only where each point is (or repeat it), never its value.
_VIEWS = ("ReorderAxes", "Broadcast")


def canonical_layout(outputs: Sequence[Node]) -> list[Node]:
    """The outputs with layout views moved out of the elementwise ops they feed."""
    memo: dict[Node, Node] = {}
    for node in creation_order(outputs):
        rebuilt = node.with_args(tuple(memo[a] for a in node.args)) if node.args else node
        memo[node] = _hoisted(rebuilt)
    return [memo[o] for o in outputs]


def _hoisted(node: Node) -> Node:
    """`View(op(sources))` for `op(View(source), ...)` when every operand is that view of a
    node with the same axes; else the node itself."""
    if not node.args or node.outputs is not None or not OPS[node.op].has("elementwise"):
        return node
    view = node.args[0].op
    if view not in _VIEWS or any(a.op != view or a.axes != node.args[0].axes for a in node.args):
        return node
    sources = tuple(a.args[0] for a in node.args)
    order = sources[0].axes
    if any(tuple(s.axes) != tuple(order) or s.axes.lengths != order.lengths for s in sources):
        return node
    try:
        inner = make_node(node.op, sources, **(node.attrs or {}))
    except NgrulesError:
        return node
    if inner.axes != order or inner.dtype != node.dtype:
        return node
    return make_node(view, (inner,), axes=node.axes)
