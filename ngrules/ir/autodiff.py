"""Reverse-mode autodiff over the op table's gradient rules."""

from __future__ import annotations

from collections.abc import Sequence

from ngrules.errors import OpError
from ngrules.ir.graph import Node, paused_gc, toposort
from ngrules.ir.ops import get_op


def _plus(total: Node | None, term: Node) -> Node:
    return term if total is None else total + term


def deriv(cost: Node, wrt: Node) -> Node:
    """d(cost)/d(wrt) for a scalar cost; the result has wrt's axes (zeros if unrelated)."""
    return derivs(cost, [wrt])[0]


def derivs(cost: Node, wrt: Sequence[Node]) -> list[Node]:
    """d(cost)/d(w) for each w of wrt, from one reverse pass: the graphs `deriv` gives one
    by one (a node's adjoint only sums terms from nodes that depend on it), built once."""
    from ngrules.ir.frontend import constant

    if not isinstance(cost, Node) or cost.outputs is not None or len(cost.axes):
        raise OpError(f"deriv needs a scalar cost, got {cost!r}")
    with paused_gc():
        adjoints = _adjoints(cost, *wrt)
    zero = [constant(0.0, w.axes, dtype=w.dtype) if w not in adjoints else None for w in wrt]
    return [adjoints[w] if z is None else z for w, z in zip(wrt, zero)]


def _adjoints(cost: Node, *wrt: Node) -> dict[Node, Node]:
    """Adjoint of every node on a path from any of `wrt` to cost."""
    from ngrules.ir.frontend import constant

    order = toposort([cost])
    needed = _reaching(order, wrt)
    adjoints: dict[Node, Node] = {cost: constant(1.0, dtype=cost.dtype)}
    multi: dict[Node, list[Node | None]] = {}
    for node in reversed(order):
        if node not in needed:
            continue
        if node.outputs is not None:
            delta = tuple(multi.get(node, [None] * len(node.outputs)))
            if all(d is None for d in delta):
                continue
        else:
            delta = adjoints.get(node)
            if delta is None:
                continue
        if node.op == "Output":
            source = node.args[0]
            slots = multi.setdefault(source, [None] * len(source.outputs))
            slots[node.attrs["index"]] = _plus(slots[node.attrs["index"]], delta)
            continue
        for arg, term in zip(node.args, get_op(node.op).grad(node, delta)):
            if term is not None and arg in needed:
                _check(node, arg, term)
                adjoints[arg] = _plus(adjoints.get(arg), term)
    return adjoints


def _reaching(order: list[Node], wrt) -> set[Node]:
    """The nodes that depend on the nodes of wrt (only their adjoints matter)."""
    reach = set(wrt)
    for node in order:
        if any(a in reach for a in node.args):
            reach.add(node)
    return reach


def _check(node: Node, arg: Node, term: Node) -> None:
    if term.axes != arg.axes or term.axes.lengths != arg.axes.lengths:
        raise OpError(f"gradient of {node.op} gave axes {term.axes!r} for an argument {arg.axes!r}")


def adjoints_through(stand_ins, outputs, args, deltas, label: str) -> tuple:
    """The adjoints of `args` for an op computed by a body of primitives: `outputs` built on
    `stand_ins` (placeholders standing for args), `deltas` the adjoints of the outputs (None
    where absent); autodiff of sum(output * delta) through the body, the stand-ins replaced by
    the arguments (None for an argument the outputs do not read)."""
    from ngrules.ir.frontend import sum as sum_
    from ngrules.ir.graph import make_node, substitute

    mapping = dict(zip(stand_ins, args))
    cost = None
    for i, (out, d) in enumerate(zip(outputs, deltas)):
        if d is None:
            continue
        d_in = make_node("Placeholder", name=f"{label}.delta{i}", axes=d.axes, dtype=d.dtype)
        mapping[d_in] = d
        term = sum_(out * d_in, out_axes=())
        cost = term if cost is None else cost + term
    if cost is None:
        return (None,) * len(stand_ins)
    with paused_gc():
        adjoints = _adjoints(cost, *stand_ins)
    grads = [adjoints.get(s) for s in stand_ins]
    found = [g for g in grads if g is not None]
    rebuilt = iter(substitute(found, mapping))
    return tuple(None if g is None else next(rebuilt) for g in grads)
