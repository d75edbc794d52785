"""The numpy executor: a graph compiled once into a flat schedule of kernel calls.

Compiling walks the graph in topological order, asks each op for its kernel, numbers every
value and records after which step each intermediate is last used, so running is one
generated function that frees memory as it goes. Constants and variables are evaluated at
compile time, and so are views and small values computed from constants alone.
"""

from __future__ import annotations

import functools
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
    """A compiled graph: `run(feeds)` returns one array per output.

    `steps` holds one `(kernel, argument slots, output slot, slots freed after it, reused
    slot)` per kernel call. A reused slot holds a dead intermediate of the output's shape and
    dtype whose buffer an elementwise kernel writes into (`out=`) instead of allocating.
    """

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
            self._nodes: list[Node] = []
            self._known: set[int] = set()  # slots whose value is known at compile time
            for node in order:
                self._add(node, slot)
            self.result_slots = [slot[o] for o in self.outputs]
            self._plan_memory()
            self._generated = None
            self._runs = 0  # code is generated at run GENERATED_AT (`GENERATED_STEPS`)
        del self._nodes, self._known

    def _add(self, node: Node, slot: dict[Node, int]) -> None:
        if node.op in ("Placeholder", "Variable"):
            self._add_input(node, slot[node])
        if node.op == "Placeholder":
            return
        if not node.args:
            self.template[slot[node]] = _leaf_value(node)
            if node.op != "Variable":  # a variable may be fed: not known at compile time
                self._known.add(slot[node])
            return
        opdef = get_op(node.op)
        kernel = opdef.kernel(node)
        if self._foldable(node, opdef, slot):
            self.template[slot[node]] = kernel(*[self.template[slot[a]] for a in node.args])
            self._known.add(slot[node])
            return
        self.steps.append((kernel, tuple(slot[a] for a in node.args), slot[node], (), None))
        self._nodes.append(node)

    def _foldable(self, node: Node, opdef, slot: dict[Node, int]) -> bool:
        """Computed once at compile time: a view of constants, or a small value of them (a
        large one is left to each run rather than kept in memory between runs)."""
        if node.outputs is not None or not all(slot[a] in self._known for a in node.args):
            return False
        return opdef.has("view") or node.axes.size <= FOLD_ELEMENTS

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

    def _plan_memory(self) -> None:
        """Free each intermediate after its last use; let elementwise steps write into the
        buffer of a dead intermediate of their shape and dtype (see `buffer_plan`)."""
        reuse, free_at = buffer_plan(self.steps, self._nodes, set(self.result_slots))
        frees: list[list[int]] = [[] for _ in self.steps]
        for value, step in free_at.items():
            frees[step].append(value)
        self.steps = [
            (k, a, o, tuple(f), r)
            for (k, a, o, _, _), f, r in zip(self.steps, frees, reuse)
        ]

    def run(
        self, feeds: Mapping[Node | str, Any] | None = None, *, ignore_unused: bool = False
    ) -> list[np.ndarray]:
        """One array per output. A feed keyed by anything but an input of this graph (its node
        or its name) is an error, unless `ignore_unused` and the key is some graph's input."""
        env = list(self.template)
        for node, value in self._resolve(feeds or {}, ignore_unused).items():
            env[self.placeholders[node]] = value
        self._runs += 1
        if self._runs == GENERATED_AT and len(self.steps) <= GENERATED_STEPS:
            self._generated = generate_run(self.steps, self.result_slots)
        if self._generated is not None:
            return [np.asarray(v) for v in self._generated(env)]
        for kernel, args, out, frees, reuse in self.steps:
            if reuse is not None:
                env[out] = kernel(*[env[a] for a in args], out=env[reuse])
            elif len(args) == 1:  # most steps: skip building an argument list
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


#: Buffers smaller than this are left to the allocator: it recycles a just-freed block (hot
#: in cache) better than a plan can, and holding dead blocks for later steps would defeat
#: that. Larger ones cost page faults on every allocation (glibc maps blocks of 128 KiB and
#: more with mmap by default), which reusing them saves: on the MLP with batchnorm
#: (`bench/executor.py`, 128 KiB activations) reusing them took the executor from 1.05x to
#: 0.97x hand-written numpy's time.
REUSE_BYTES = 1 << 17

#: Values computed from constants alone are computed at compile time if they are views or at
#: most this many elements.
FOLD_ELEMENTS = 4096

#: Programs with more steps than this run in the interpreter loop instead of generated code
#: (compiling one function per program costs time and memory in the number of steps).
GENERATED_STEPS = 50_000
#: The run of a program at which its code is generated; the runs before are the loop.
#: Compiling costs about ten runs' worth of what generated code saves per run (90 steps:
#: 0.9 ms to compile, 0.13 ms a run in the loop, 0.04 ms in code), and most programs
#: verification builds run once or twice (8,600 of them for the library).
GENERATED_AT = 8


def buffer_plan(steps: list[tuple], nodes: list[Node], keep: set[int]):
    """Which dead buffer each step writes into (a slot or None), and after which step each
    intermediate is freed.

    A buffer is reused only when it is large (`REUSE_BYTES`) and that is safe: it was made
    by an elementwise kernel (a numpy ufunc, so it is a fresh array of its own, never a feed,
    a constant or a view), every reader of it is such a kernel too (none can have kept a view
    of it), it is no output, and the step writing into it is a ufunc making no output, its
    inputs all of its output's dtype (so numpy computes in that dtype either way). Buffers
    dying at a step are offered to that step first (in place), then kept for later steps of
    their shape and dtype.
    """
    ufunc = [isinstance(k, np.ufunc) for k, *_ in steps]
    made_by = {out: i for i, (_, _, out, _, _) in enumerate(steps)}
    last: dict[int, int] = {}
    escapes: set[int] = set(keep)
    for i, (_, args, _, _, _) in enumerate(steps):
        for a in args:
            last[a] = i
            if not ufunc[i]:
                escapes.add(a)
    owned = {
        out for i, (_, _, out, _, _) in enumerate(steps)
        if ufunc[i] and len(nodes[i].axes) and out not in escapes
    }
    free_at = {v: step for v, step in last.items() if v not in keep}
    pool: dict[tuple, list[int]] = {}  # dead buffers by (shape, dtype), not yet reused
    reuse: list[int | None] = []
    for i, (_, args, out, _, _) in enumerate(steps):
        node = nodes[i]
        dying = [a for a in dict.fromkeys(args) if last[a] == i and a in owned]
        key = (node.axes.lengths, node.dtype)
        chosen = None
        big = node.outputs is None and node.dtype.itemsize * node.axes.size >= REUSE_BYTES
        if big and ufunc[i] and out not in keep and _same_dtype(node):
            same = [a for a in dying if _key(nodes, made_by, a) == key]
            if same:
                chosen = same[0]
            elif pool.get(key):
                chosen = pool[key].pop()
        reuse.append(chosen)
        for a in dying:
            if a != chosen:  # kept alive in its slot until a later step takes it
                pool.setdefault(_key(nodes, made_by, a), []).append(a)
        if chosen is not None:
            free_at[chosen] = i  # its buffer now belongs to `out`
    return reuse, free_at


def generate_run(steps: list[tuple], results: list[int]):
    """The steps as one straight-line Python function `run(env)` returning the results: each
    value in a local (`v<slot>`), each kernel a constant (`k<step>`), each free an assignment
    of None. Only generated identifiers appear in the source."""
    produced = {out for _, _, out, _, _ in steps}
    read = {a for _, args, _, _, _ in steps for a in args} | set(results)
    lines = ["def run(env):"]
    lines += [f"    v{s} = env[{s}]" for s in sorted(read - produced)]
    kernels = {}
    for i, (kernel, args, out, frees, reuse) in enumerate(steps):
        kernels[f"k{i}"] = kernel
        call = ", ".join(f"v{a}" for a in args) + ("" if reuse is None else f", out=v{reuse}")
        lines.append(f"    v{out} = k{i}({call})")
        if frees:
            lines.append("    " + " = ".join(f"v{f}" for f in frees) + " = None")
    lines.append(f"    return [{', '.join(f'v{s}' for s in results)}]")
    namespace = dict(kernels)
    exec(_compiled("\n".join(lines) + "\n"), namespace)  # noqa: S102
    return namespace["run"]


@functools.lru_cache(maxsize=256)
def _compiled(source: str):
    """The code of a generated `run` (verification compiles the same few programs thousands
    of times, each with its own kernels: only the code is shared)."""
    return compile(source, "<ngrules program>", "exec")


def _same_dtype(node: Node) -> bool:
    return all(a.dtype == node.dtype for a in node.args)


def _key(nodes: list[Node], made_by: dict[int, int], slot: int) -> tuple:
    node = nodes[made_by[slot]]
    return node.axes.lengths, node.dtype


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
