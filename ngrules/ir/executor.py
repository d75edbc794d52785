"""The numpy executor: a graph compiled once into a flat schedule of kernel calls.

Compiling walks the graph in topological order, asks each op for its kernel, numbers every
value and records after which step each intermediate is last used, so running is one loop
that frees memory as it goes. Constants and variables are evaluated at compile time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ngrules.errors import ExecutionError, NgrulesError
from ngrules.ir.graph import Node, paused_gc, toposort
from ngrules.ir.ops import get_op

_CACHE_SIZE = 8
_cache: OrderedDict[tuple[Node, ...], Program] = OrderedDict()


class Program:
    """A compiled graph: `run(feeds)` returns one array per output."""

    def __init__(self, outputs: Sequence[Node]):
        self.outputs = tuple(outputs)
        with paused_gc():
            order = toposort(self.outputs)
            slot = {node: i for i, node in enumerate(order)}
            self.size = len(order)
            self.placeholders: dict[Node, int] = {}
            self.by_name: dict[str, Node] = {}
            self.ambiguous: dict[str, str] = {}
            self.template: list[Any] = [None] * self.size
            self.steps: list[tuple] = []
            for node in order:
                self._add(node, slot)
            self._plan_frees(slot)
        self.result_slots = [slot[o] for o in self.outputs]

    def _add(self, node: Node, slot: dict[Node, int]) -> None:
        if node.op in ("Placeholder", "Variable"):
            self._add_input(node, slot[node])
        if node.op == "Placeholder":
            return
        if not node.args:
            self.template[slot[node]] = _leaf_value(node)
            return
        kernel = get_op(node.op).kernel(node)
        self.steps.append((kernel, tuple(slot[a] for a in node.args), slot[node], ()))

    def _add_input(self, node: Node, index: int) -> None:
        """A placeholder or variable, which feeds may name. Two placeholders may not share a
        name; a name shared with a variable cannot be fed by name (only by node)."""
        name = node.attrs["name"]
        other = self.by_name.setdefault(name, node)
        if other is not node:
            message = f"two inputs are named {name!r}: {other!r} and {node!r}"
            if other.op == node.op == "Placeholder":
                raise ExecutionError(f"{message} (give them different names)")
            self.ambiguous[name] = message
        self.placeholders[node] = index

    def _plan_frees(self, slot: dict[Node, int]) -> None:
        """After each step, drop the values no later step (and no output) reads."""
        keep = {slot[o] for o in self.outputs}
        last: dict[int, int] = {}
        for i, (_, args, _, _) in enumerate(self.steps):
            for a in args:
                last[a] = i
        frees: list[list[int]] = [[] for _ in self.steps]
        for value, step in last.items():
            if value not in keep:
                frees[step].append(value)
        self.steps = [(k, a, o, tuple(f)) for (k, a, o, _), f in zip(self.steps, frees)]

    def run(
        self, feeds: Mapping[Node | str, Any] | None = None, *, ignore_unused: bool = False
    ) -> list[np.ndarray]:
        """One array per output. A feed keyed by anything but an input of this graph (its node
        or its name) is an error, unless `ignore_unused` and the key is some graph's input."""
        env = list(self.template)
        for node, value in self._resolve(feeds or {}, ignore_unused).items():
            env[self.placeholders[node]] = value
        for kernel, args, out, frees in self.steps:
            if len(args) == 1:  # most steps: skip building an argument list
                env[out] = kernel(env[args[0]])
            else:
                env[out] = kernel(*[env[a] for a in args])
            for f in frees:
                env[f] = None
        return [np.asarray(env[s]) for s in self.result_slots]

    def _resolve(self, feeds: Mapping[Node | str, Any], ignore_unused: bool) -> dict:
        """Check every feed against its placeholder's axes and dtype."""
        values: dict[Node, np.ndarray] = {}
        for key, value in feeds.items():
            if isinstance(key, str) and key in self.ambiguous:
                raise ExecutionError(f"{self.ambiguous[key]}: feed them by node, not by name")
            node = self.by_name.get(key) if isinstance(key, str) else key
            if not isinstance(node, Node) or node not in self.placeholders:
                if ignore_unused and (isinstance(key, str) or _is_input(key)):
                    continue
                known = ", ".join(sorted(self.by_name)) or "none"
                what = f"the name {key!r}" if isinstance(key, str) else f"{key!r}"
                raise ExecutionError(
                    f"a feed is keyed by {what}, which is not an input of this graph "
                    f"(key feeds by placeholder node or name; inputs: {known})"
                )
            values[node] = _checked_feed(node, value)
        for node in self.placeholders:
            if node.op == "Placeholder" and node not in values:
                raise ExecutionError(
                    f"missing feed for placeholder {node.attrs['name']!r} "
                    f"(axes {node.axes!r}, {node.dtype.name})"
                )
        return values


def _is_input(key: Any) -> bool:
    return isinstance(key, Node) and key.op in ("Placeholder", "Variable")


def _leaf_value(node: Node) -> Any:
    """A constant's or variable's value, made once at compile time; too big is an error."""
    try:
        return get_op(node.op).kernel(node)()
    except (MemoryError, ValueError) as e:
        wanted = node.axes.size * node.dtype.itemsize
        raise ExecutionError(
            f"{node!r}: cannot allocate its value ({wanted} bytes): {type(e).__name__}"
        ) from None


def _checked_feed(node: Node, value: Any) -> np.ndarray:
    array = np.asarray(value)
    name = node.attrs["name"]
    if array.shape != node.axes.lengths:
        raise ExecutionError(
            f"feed for {name!r} has shape {array.shape}, expected axes {node.axes!r} "
            f"(shape {node.axes.lengths})"
        )
    if array.dtype != node.dtype:
        raise ExecutionError(
            f"feed for {name!r} has dtype {array.dtype}, expected {node.dtype.name} "
            f"(axes {node.axes!r})"
        )
    return array


def compile_graph(outputs: Sequence[Node]) -> Program:
    """The compiled program for these outputs (cached for the most recent graphs)."""
    key = tuple(outputs)
    program = _cache.get(key)
    if program is None:
        for o in key:
            if not isinstance(o, Node) or o.outputs is not None:
                raise NgrulesError(f"outputs must be single-output nodes, got {o!r}")
        program = Program(key)
        _cache[key] = program
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return program


def execute(
    outputs: Sequence[Node],
    feeds: Mapping[Node | str, Any] | None = None,
    *,
    ignore_unused: bool = False,
):
    """Run the graph; one numpy array per output, each in its node's axes order.

    feeds: a value per placeholder, keyed by its node or its name. A key that is not an input
    of this graph is an error (a typo, a node of another graph), unless `ignore_unused` is
    set and the key names some input (to feed one set of values to several graphs).
    """
    return compile_graph(outputs).run(feeds, ignore_unused=ignore_unused)
