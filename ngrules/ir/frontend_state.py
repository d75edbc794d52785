"""ngraph's stateful spellings: `assign`, `sequential`, `value_of`, and the sizes `tensor_size`
and `squared_L2` that training code reads.

`sequential(ops)` runs its ops in order, each node once (a node met again keeps the value it
had), and is the value of the last; reads of a variable after an `assign` to it read the
assigned value. The graph stays pure: `sequential` threads the variables' values through
copies of the later ops (see `ngrules.ir.builtin.state`), so rules rewrite a training step
like any graph and `ngrules.ir.stateful.executor` keeps the variables between runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from ngrules.errors import OpError
from ngrules.ir.axes import Axes, AxesLike, make_axes
from ngrules.ir.frontend import broadcast, constant, multiply
from ngrules.ir.frontend import sum as sum_
from ngrules.ir.graph import Node, make_node


def assign(variable: Node, value) -> Node:
    """`variable` takes `value` (broadcast to its axes, a number or a node of its dtype)."""
    if not isinstance(variable, Node) or variable.op != "Variable":
        raise OpError(f"assign needs a variable to assign to, got {variable!r}")
    if not isinstance(value, Node):
        value = constant(value, dtype=variable.dtype)
    return make_node("Assign", (variable, broadcast(value, variable.axes)))


def value_of(x: Node) -> Node:
    """x as read where this node stands in a sequential: later assignments do not change it."""
    return make_node("ValueOf", (x,))


def sequential(ops: Sequence[Node]) -> Node:
    """Run `ops` in order (each node once) and give the value of the last."""
    if not ops:
        raise OpError("sequential needs at least one op")
    thread = _Thread()
    result = None
    for op in ops:
        result = thread.run(op)
    return make_node("Sequential", (result, *thread.assigns))


class _Thread:
    """The values of one sequential run: each node's value as first reached, each variable's
    current value (its last assignment), and the assignments so far."""

    def __init__(self):
        self.done: dict[Node, Node] = {}
        self.current: dict[Node, Node] = {}
        self.assigns: list[Node] = []

    def run(self, root: Node) -> Node:
        stack = [root]
        while stack:  # post-order without recursion: graphs may be deep
            node = stack[-1]
            if self._known(node) is not None:
                stack.pop()
                continue
            missing = [a for a in node.args if self._known(a) is None]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            self._finish(node)
        return self._known(root)

    def _known(self, node: Node) -> Node | None:
        if node.op == "Variable":
            return self.current.get(node, node)
        return self.done.get(node)

    def _finish(self, node: Node) -> None:
        args = [self._known(a) for a in node.args]
        if node.op == "Assign":
            args[0] = node.args[0]  # the variable itself, never a value of it
        same = all(a is b for a, b in zip(args, node.args))
        new = node if same else node.with_args(tuple(args))
        if node.op == "Assign":
            self.current[node.args[0]] = new
            self.assigns.append(new)
        self.done[node] = new


def tensor_size(x: Node, reduction_axes: AxesLike | None = None,
                out_axes: AxesLike | None = None) -> Node:
    """The number of elements of x over `reduction_axes` (default: all but the batch axes, or
    all but `out_axes`), as a scalar constant: lengths are static."""
    return constant(float(_reduced(x, reduction_axes, out_axes).size))


def squared_L2(x: Node, out_axes: AxesLike | None = None,  # noqa: N802 - ngraph's name
               reduction_axes: AxesLike | None = None) -> Node:
    """sum(x * x) over `reduction_axes` (default: all but the batch axes, or all but
    `out_axes`)."""
    return sum_(multiply(x, x), reduction_axes=_reduced(x, reduction_axes, out_axes))


def _reduced(x: Node, reduction_axes, out_axes) -> Axes:
    if reduction_axes is not None:
        return make_axes(reduction_axes)
    if out_axes is not None:
        return x.axes - make_axes(out_axes)
    return x.axes.sample_axes()
