"""Writing back the recipes `recipes` recorded at import: after the exporter has written a
model, each initializer equal to a recorded value (or, for a Reshape's target, resolving to it)
and read by an op of the kind that read the value in the model is replaced by the model's own
nodes computing it. Leaves must be in the written model as they were (a graph input of the same
shape; a value read only through its shape: any written value of that shape made before the
initializer's first reader, so no cycle); the model's shape computations that nothing read are
written too. Each of the model's nodes is written at most once.
"""

from __future__ import annotations

import re

import numpy as np

from ngrules.interop.onnx import ndarrays, proto
from ngrules.interop.onnx.importing.recipes import LIMIT, Book, books
from ngrules.interop.onnx.written import attribute
from ngrules.ir.graph import Node


def write_back(em, order, opset: int, renames: dict[str, str]) -> int:
    """Replace each written initializer that a recipe computes by the recipe's nodes; the
    number replaced. `renames`: written names `finish` renamed (to the graph's outputs)."""
    count = 0
    for book in books(order):
        if book.opset == opset:
            count += _Writer(em, book, renames).run()
    return count


#: the names `Emitter.fresh` makes.
_FRESH = re.compile(r"(v|c|r|unread)[0-9]+")


class _Writer:
    def __init__(self, em, book: Book, renames: dict[str, str]):
        self.em, self.book, self.renames = em, book, renames
        self.taken = {vi.name for vi in em.inputs} | {t.name for t in em.inits} | \
            set(em.weights or ()) | {o for n in em.nodes for o in n.output}
        self.shapes = {vi.name: tuple(d.dim_value if d.HasField("dim_value") else None
                                      for d in vi.type.tensor_type.shape.dim)
                       for vi in em.inputs}
        self.written_shapes: dict | None = None
        #: each written value -> the index of the node making it (-1: an input, an initializer)
        self.position = {name: -1 for name in self.taken}
        self.position.update((o, i) for i, n in enumerate(em.nodes) for o in n.output)
        self.before = 0  # the index of the first reader of the initializer being replaced
        self.ready: dict[str, int] = {}  # a written recipe's value -> its latest leaf's index
        self.names: dict[str, str] = {}  # a recipe's value -> its written name
        self.added: list = []

    def run(self) -> int:
        readers: dict[str, list] = {}
        for node in self.em.nodes:
            for i, x in enumerate(node.input):
                readers.setdefault(x, []).append((node, i))
        count, inits = 0, len(self.em.inits)
        for t in list(self.em.inits):
            if t.name not in readers or int(np.prod(t.dims)) > LIMIT:
                continue
            ops = {node.op_type for node, _ in readers[t.name]}
            value = ndarrays.to_array(t)
            found = [n for n in self.book.lookup(value) if self.book.readers.get(n, set()) & ops]
            if not found and ops == {"Reshape"}:
                found = self._targets(value, readers[t.name])
            found.sort(key=lambda n: n in self.names)  # each of the model's nodes once first
            self.before = min(self.position.get(node.output[0], 0) for node, _ in readers[t.name])
            for name in found:
                written = self._write(name)
                if written is None:
                    continue
                for node, i in readers[t.name]:
                    node.input[i] = written
                count += 1
                break
        self.before = len(self.em.nodes)
        for name in self.book.dead:  # the model's own nodes that nothing reads: kept too
            self._write(name)
        if count or self.added or len(self.em.inits) != inits:
            self._finish()
        return count

    def _targets(self, value: np.ndarray, readers: list) -> list[str]:
        """Recorded Reshape targets (with 0 and -1) that give `value` where it is read."""
        if value.ndim != 1 or any(i != 1 or attribute(n, "allowzero", 0) for n, i in readers):
            return []
        shapes = self._shapes()
        found = []
        for name in self.book.targets.get(len(value), ()):
            target = self.book.values[name]
            if all(_resolved(target, shapes.get(n.input[0])) == [int(v) for v in value]
                   for n, _ in readers):
                found.append(name)
        return found

    def _shapes(self) -> dict[str, tuple]:
        if self.written_shapes is None:
            self.written_shapes = dict(self.shapes)
            for v in self.em.values.values():
                if v.name is not None:
                    self.written_shapes.setdefault(self.renames.get(v.name, v.name),
                                                   tuple(v.shape))
            for (_, order), name in self.em._exact.items():
                self.written_shapes.setdefault(self.renames.get(name, name),
                                               tuple(a.length for a in order))
            _propagate(self.em, self.written_shapes)
        return self.written_shapes

    def _write(self, name: str) -> str | None:
        """The written name of a recipe's value (its nodes written first), or None."""
        plan: list = []
        saved = dict(self.names), set(self.taken), dict(self.ready)
        if not self._plan(name, plan):
            self.names, self.taken, self.ready = saved
            return None
        from ngrules.interop.onnx.exporting.passes.downgrade import AS_READ

        for node in plan:
            for i, x in enumerate(node.input):
                if x:
                    node.input[i] = self.names[x]
            node.doc_string = AS_READ  # in the opset's own form: `downgrade` leaves it
            self.added.append(node)
        return self.names[name]

    def _plan(self, name: str, plan: list) -> bool:
        """Add the nodes computing `name` to `plan` (inputs first); False when a leaf is not
        in the written model as it was, or is made after the initializer's first reader."""
        if name in self.names:
            return self.ready[name] < self.before
        book = self.book
        if name in book.nodes:
            original = book.nodes[name]
            inputs = [x for x in original.input if x]
            if not all(self._plan(x, plan) for x in inputs):
                return False

            node = proto.NodeProto()
            node.CopyFrom(original)
            node.name = ""
            ready = max((self.ready[x] for x in inputs), default=-1)
            for i, o in enumerate(node.output):
                if o:
                    node.output[i] = self._claim(o)
                    self.names[o], self.ready[o] = node.output[i], ready
            plan.append(node)
            return True
        written = self._leaf(name)
        if written is None:
            return False
        self.names[name], self.ready[name] = written, self.position.get(written, -1)
        return True

    def _leaf(self, name: str) -> str | None:
        book = self.book
        if name in book.inits:
            written = self._claim(name)
            self.em.inits.append(ndarrays.from_array(book.inits[name], written))
            self.position[written] = -1
            return written
        if name in book.inputs:
            ok = self.shapes.get(name) == book.inputs[name]
            return name if ok else None
        if name in book.live:
            ref, axes = book.live[name]
            return self._holding(ref(), axes)
        return None

    def _holding(self, node: Node | None, axes: tuple) -> str | None:
        """The earliest written value with these axes in this order, made before the
        initializer's first reader: read only through its shape, any such value serves."""
        lengths = tuple(a.length for a in axes)
        best = None
        found = [v.name for v in self.em.values.values() if v.name is not None
                 and tuple(v.dims) == axes and tuple(v.shape) == lengths]
        found += [name for (_, order), name in self.em._exact.items() if order == axes]
        if not found:  # (renamed axes: any value of that shape)
            found = [name for name, shape in self._shapes().items() if shape == lengths]
        for name in found:
            written = self.renames.get(name, name)
            at = self.position.get(written)
            if at is not None and at < self.before and (best is None or at < best[0]):
                best = (at, written)
        return None if best is None else best[1]

    def _claim(self, name: str) -> str:
        """The name itself when no written value has it and the exporter's later passes cannot
        make it (`Emitter.fresh`'s names: v12, c3...), else a fresh one."""
        mine = name in self.taken or _FRESH.fullmatch(name)
        written = self.em.fresh("r") if mine else name
        self.taken.add(written)
        return written

    def _finish(self) -> None:
        """The recipes' nodes in the graph, in an order that computes each value before its
        readers; initializers nothing reads any more dropped."""
        em = self.em
        em.nodes[:] = _ordered(em.nodes + self.added)
        read = {x for n in em.nodes for x in n.input} | {o for n in em.nodes for o in n.output}
        em.inits[:] = [t for t in em.inits if t.name in read]


def _propagate(em, shapes: dict[str, tuple]) -> None:
    """The shapes of the values a written Transpose, Reshape (to an initializer), Identity or
    Cast makes, from their inputs' (the layout's own moves, not recorded as values)."""
    inits = {t.name: t for t in em.inits}
    for node in em.nodes:
        if not node.input or node.output[0] in shapes or node.input[0] not in shapes:
            continue
        shape = shapes[node.input[0]]
        if node.op_type in ("Identity", "Cast"):
            shapes[node.output[0]] = shape
        elif node.op_type == "Transpose":
            perm = attribute(node, "perm", list(range(len(shape)))[::-1])
            shapes[node.output[0]] = tuple(shape[p] for p in perm)
        elif node.op_type == "Reshape" and len(node.input) > 1 and node.input[1] in inits:
            target = ndarrays.to_array(inits[node.input[1]])
            resolved = _resolved(target, shape) if not attribute(node, "allowzero", 0) else None
            if resolved is not None:
                shapes[node.output[0]] = tuple(resolved)


def _resolved(target: np.ndarray, shape: tuple | None) -> list[int] | None:
    """A Reshape's target with its 0s (copies of the input's dimension) and -1 (the rest)
    worked out for an input of this shape."""
    if shape is None or any(not isinstance(d, int) or d < 0 for d in shape):
        return None
    out = [int(shape[i]) if v == 0 and i < len(shape) else int(v) for i, v in enumerate(target)]
    if any(v == 0 for v, t in zip(out, target) if t == 0) and len(target) > len(shape):
        return None
    if out.count(-1) == 1:
        rest = int(np.prod([v for v in out if v != -1]))
        total = int(np.prod(shape))
        if rest <= 0 or total % rest:
            return None
        out[out.index(-1)] = total // rest
    return out


def _ordered(nodes: list) -> list:
    """The nodes in a topological order, keeping the given order where it already is one."""
    made = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    done: set[int] = set()
    entered: set[int] = set()
    out: list = []

    def visit(i: int) -> None:
        stack = [(i, False)]
        while stack:
            j, ready = stack.pop()
            if j in done:
                continue
            if ready:
                done.add(j)
                out.append(nodes[j])
                continue
            if j in entered:  # (a cycle: never made here, kept as given)
                continue
            entered.add(j)
            stack.append((j, True))
            for x in reversed(nodes[j].input):
                k = made.get(x)
                if k is not None and k not in done:
                    stack.append((k, False))

    for i in range(len(nodes)):
        visit(i)
    return out
