"""Every layout of an instance: each leaf in every order of its axes.

The builder samples instances; a bounded proof must not rest on the layouts it happened to
draw. For each instance drawn (its shape), every leaf (placeholder or constant) of rank >= 2
is laid out in every order of its axes and the graph above is rebuilt (the op table infers the
axes again); each layout the rule still fires on is an instance to judge (ill-formed?) and to
prove. `a - Broadcast?(c)` with `a` on `[a, b]` and `c` on `[b, a]` is one of them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ngrules.errors import NgrulesError
from ngrules.ir.graph import Node, make_node, toposort
from ngrules.verification.instances import Instance
from ngrules.verification.instances.sampling import rewrite_instance

#: Layouts per rule at most: beyond, the proof says it is not exhaustive (no proof).
MAX_LAYOUTS = 400


def _orders(node: Node) -> list[tuple]:
    """The layouts of a node: (order of its axes, wrapped in a Broadcast back to its drawn
    order or not); only the drawn one for a node that is not a leaf or a broadcast."""
    rank = len(node.axes)
    fixed = [(tuple(range(rank)), False)]
    if rank < 2 or node.op not in ("Placeholder", "Constant", "Broadcast"):
        return fixed
    if node.op == "Constant" and np.ndim(node.attrs["value"]) != rank:
        return fixed  # a scalar: no layout of its own
    perms = list(itertools.permutations(range(rank)))
    return fixed + [(p, w) for p in perms[1:] for w in (False, True)]


def layout_count(inst: Instance) -> int:
    count = 1
    for node in toposort(inst.outputs):
        count *= len(_orders(node))
    return count


def layout_shape(inst: Instance) -> tuple:
    """An instance's structure as the layout check sees it: each leaf's and broadcast's op and
    rank (and a constant's own rank), lengths aside."""
    return tuple((n.op, len(n.axes), np.ndim(n.attrs["value"]) if n.op == "Constant" else -1)
                 for n in toposort(inst.outputs) if not n.args or n.op == "Broadcast")


def _relaid(node: Node, args: list[Node], order: tuple[int, ...], wrap: bool) -> Node:
    attrs = dict(node.attrs)
    attrs["axes"] = type(node.axes)([node.axes[i] for i in order])
    if node.op == "Constant":
        attrs["value"] = np.transpose(np.asarray(attrs["value"]), order)
    laid = make_node(node.op, args, **attrs)
    return make_node("Broadcast", [laid], axes=node.axes) if wrap else laid


def layouts(inst: Instance, limit: int | None = None) -> Iterator[Instance]:
    """The instance in every layout of its leaves and broadcasts that builds and that the rule
    fires on (the drawn layout among them), out of the first `limit` layouts (None: all)."""
    nodes = [n for n in toposort(inst.outputs)]
    movable = [n for n in nodes if len(_orders(n)) > 1]
    combos = itertools.product(*(_orders(n) for n in movable))
    for combo in itertools.islice(combos, limit):
        chosen = dict(zip(movable, combo))
        memo: dict[Node, Node] = {}
        try:
            for node in nodes:
                args = [memo[a] for a in node.args]
                if node in chosen:
                    memo[node] = _relaid(node, args, *chosen[node])
                elif node.args:
                    memo[node] = make_node(node.op, args, **dict(node.attrs))
                else:
                    memo[node] = node
        except (NgrulesError, ValueError, TypeError):
            continue  # an op that needs the drawn order (a flatten of adjacent axes)
        feeds = {memo[k].args[0] if memo[k].op == "Broadcast" and k.op != "Broadcast"
                 else memo[k]: np.transpose(v, chosen[k][0]) if k in chosen else v
                 for k, v in inst.feeds.items() if k in memo}
        laid = rewrite_instance(inst.rule, [memo[o] for o in inst.outputs], feeds)
        if laid.fired:
            laid.assumed = tuple((a, memo.get(n, n)) for a, n in inst.assumed)
            yield laid


@dataclass
class LayoutCheck:
    """What `ill_formed_layout` found: a counterexample or None, and the layouts it tried
    (built or not, fired or not) out of the bound it was given."""

    counterexample: object | None
    tried: int
    bound: int

    def __str__(self) -> str:
        return f"{self.tried} layouts tried for ill-formedness (bound {self.bound})"


def ill_formed_layout(instances, budget: int = 150) -> LayoutCheck:
    """The first layout of the instances whose rewrite is ill-formed, as a counterexample, out
    of at most `budget` layouts in all. The smallest instances come first, and each takes at
    most an even share of what is left (a small one leaves the rest of its share to the
    larger): the larger instances, often the only ones of the rank that breaks a rule, are
    not starved by the small ones."""
    from ngrules.verification.verdicts import Counterexample, ill_formed

    left = budget
    counted = sorted(((layout_count(inst), inst) for inst in instances), key=lambda ci: ci[0])
    for k, (count, inst) in enumerate(counted):
        if left <= 0:
            break
        share = min(count, max(1, left // (len(counted) - k)))
        for laid in layouts(inst, share):
            bad = ill_formed(laid)
            if bad is not None:
                tried = budget - left + share
                where = f"in another layout of an instance, among {tried} tried (bound {budget})"
                cx = Counterexample(laid.rule, laid.outputs, laid.feeds, f"{bad} ({where})",
                                    laid.after)
                return LayoutCheck(cx, tried, budget)
        left -= share
    return LayoutCheck(None, budget - left, budget)
