"""Layout views moved out of elementwise ops: the built-in pass `canonical_layout`.

An imported model often computes in one layout and writes in another, so its SiLU reads
`ReorderAxes(d) * ReorderAxes(Sigmoid(d))` and a rule `x * Sigmoid(x)` does not match it as
written. After this walk, an elementwise op whose operands are all the same layout view
(`ReorderAxes` to one order, or `Broadcast` to one set of axes) of nodes whose axes agree
(names, lengths and order) computes on those nodes, and the view is applied once to its
result: `ReorderAxes(d * Sigmoid(d))`. A one-operand elementwise op of a view is the view of
the op (`Sigmoid(ReorderAxes(d))` is `ReorderAxes(Sigmoid(d))`), so chains gather their views
at the top. Two more forms of a keep-dims reduction (ONNX's `ReduceMean(keepdims=1)`): two
operands broadcast to one set of axes from smaller ones (`Broadcast(mean) + Broadcast(eps)`)
are combined on fewer axes (ngraph's broadcasting) and broadcast once; and a `TensorSlice`
that only drops the unit axes a `Broadcast` added is that broadcast's source. Values never
change: an elementwise op computes point by point, and a reorder or a broadcast only moves or
repeats points. Nodes the walk cannot rebuild (an op that refuses the operands' axes) stay as
they were. A body `decompose` wrote that the walk rebuilds still stands for its composite
(`composite.carry`), so a writer writes the ONNX op back when no rule changed it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ngrules.errors import NgrulesError
from ngrules.ir import composite
from ngrules.ir.frontend import apply_op
from ngrules.ir.graph import Node, creation_order, make_node
from ngrules.ir.ops import OPS

#: The name pipelines use for this pass (reserved: no rules file may declare it).
PASS_NAME = "canonical_layout"  # in lang.rules.BUILTIN_PASSES

#: The views moved: they change only where each point is (or repeat it), never its value.
VIEWS = ("ReorderAxes", "Broadcast")


def canonical_layout(outputs: Sequence[Node]) -> list[Node]:
    """The outputs with layout views moved out of the elementwise ops they feed."""
    memo: dict[Node, Node] = {}
    order = creation_order(outputs)
    for node in order:
        rebuilt = node.with_args(tuple(memo[a] for a in node.args)) if node.args else node
        memo[node] = _hoisted(rebuilt)
    known = set(order)
    for node in order:  # a body `decompose` wrote stays its composite for the writer
        if memo[node] not in known:
            composite.carry(node, memo[node], memo)
    return [memo[o] for o in outputs]


def _hoisted(node: Node) -> Node:
    """`View(op(sources))` for `op(View(source), ...)` when every operand is that view of a
    node with the same axes (or, for broadcasts, of nodes on fewer axes); a keep-dims slice
    of a broadcast, the broadcast's source; else the node itself."""
    if node.op == "TensorSlice" and node.args[0].op == "Broadcast":
        return _keep_dims_dropped(node)
    if not node.args or node.outputs is not None:
        return node
    view = node.args[0].op  # checked first: most nodes' first operand is no view
    if view not in VIEWS or not OPS[node.op].has("elementwise"):
        return node
    if any(a.op != view or a.axes != node.args[0].axes for a in node.args):
        return node
    sources = tuple(a.args[0] for a in node.args)
    order = sources[0].axes
    try:
        if all(tuple(s.axes) == tuple(order) and s.axes.lengths == order.lengths
               for s in sources):
            inner = make_node(node.op, sources, **(node.attrs or {}))
        elif view == "Broadcast" and len(sources) == 2 and not node.attrs:
            inner = apply_op(node.op, sources)  # ngraph's broadcasting, on fewer axes
        else:
            return node
        names, wanted = set(inner.axes.names), set(node.axes.names)
        if inner.dtype != node.dtype or not (names < wanted or tuple(inner.axes) == tuple(order)):
            return node
        return make_node(view, (inner,), axes=node.axes)
    except NgrulesError:
        return node


def _keep_dims_dropped(node: Node) -> Node:
    """`s` for `TensorSlice(Broadcast(s, U))` whose slices keep every axis whole except unit
    axes that they index, when what is left is `s`'s axes in `s`'s order."""
    source = node.args[0].args[0]
    whole = all(
        (start, step) == (0, 1) and min(stop, ax.length) == ax.length
        or (ax.length == 1 and step == 0 and start == 0)
        for (start, stop, step), ax in zip(node.attrs["slices"].tolist(), node.args[0].axes)
    )
    same = tuple(node.axes) == tuple(source.axes) and node.axes.lengths == source.axes.lengths
    return source if whole and same and source.dtype == node.dtype else node
