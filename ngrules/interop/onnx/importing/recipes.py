"""Shape computations the importer folded, written back as the model's own nodes.

The IR's shapes are static, so the importer folds a model's arithmetic on shapes (Shape, Size,
Gather, Concat, Range, ConstantOfShape, a Cast and Sqrt of a head size...) into constants, and
the exporter would write each as an initializer: the nodes that computed it would be lost. Here
the importer records a *recipe* for each small value it folded: the original nodes that
computed it, whose leaves are Constant nodes, small initializers, graph inputs and values the
graph computes (read only through their shape, by Shape or Size). After writing
(`recipe_writer`), an initializer equal to a recipe's value (same type, shape and contents),
read by an op of the kind that read the value in the model, is replaced by the recipe's nodes
(each written once, under its own name where free) when every leaf is in the written model
with the shape it had: the same value, computed as the model computed it. A value a rule
rewrote is not written again: its initializer holds another value, or another op reads it.
Values from symbolic lengths are left to `dynamic`; nothing is written back at an opset other
than the one read, nor after a rewrite that ran `fold_constants` (as every shipped pipeline
does: it makes such values constants on purpose). Recipes hang on the import's placeholders,
which are interned: the latest import of equal graph inputs is the one whose recipes an export
of them writes.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from ngrules.interop.onnx import proto
from ngrules.ir.folded import on_fold
from ngrules.ir.graph import Node

#: values of more elements are not recorded (nor compared): recipes stay cheap to keep.
LIMIT = 4096

#: a graph input placeholder -> the recipes of the import it came from.
_BOOKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

#: ops that read only the shape (Shape, Size) or the type (CastLike) of one input: its index.
_SHAPE_READERS = {"Shape": 0, "Size": 0, "CastLike": 1}


@dataclass(eq=False)
class Book:
    """The recipes of one import: each recipe node by its outputs, the leaves they read, the
    folded values by their contents and the ops that read each value in the model."""

    opset: int
    nodes: dict[str, object] = field(default_factory=dict)
    inits: dict[str, np.ndarray] = field(default_factory=dict)
    inputs: dict[str, tuple] = field(default_factory=dict)
    live: dict[str, tuple] = field(default_factory=dict)  # name -> (IR node ref, axes)
    index: dict[tuple, list] = field(default_factory=dict)  # key -> [(name, value)]
    readers: dict[str, set] = field(default_factory=dict)
    values: dict[str, np.ndarray] = field(default_factory=dict)  # Reshape targets' values
    targets: dict[int, list] = field(default_factory=dict)  # length -> Reshape targets
    dead: list = field(default_factory=list)  # values nothing in the model reads
    placeholders: int = 0  # the import's graph inputs

    def lookup(self, value: np.ndarray) -> list[str]:
        """The recorded values equal to `value` (type, shape and contents)."""
        found = self.index.get(_key(value), ())
        return [name for name, v in found if np.array_equal(v, value)]


def _key(value: np.ndarray) -> tuple:
    return value.dtype.str, value.shape, hash(np.ascontiguousarray(value).tobytes())


def record(importer, opset: int | None) -> None:
    """Record the recipes of the values the importer folded (on its placeholders)."""
    if opset is None or not importer.placeholders:
        return
    book = Book(opset)
    graph = importer.folding.base.graph
    inits = {t.name for t in graph.initializer}
    made: set[str] = set()
    known = _Known(importer)
    for node in graph.node:
        if _recipe_node(importer, known, node, made, inits, book):
            made.update(o for o in node.output if o)
    if not book.nodes:
        for p in importer.placeholders.values():
            _BOOKS.pop(p, None)  # (an earlier import's, of equal inputs: not this model's)
        return
    for node in graph.node:
        for x in node.input:
            if x in book.nodes:
                book.readers.setdefault(x, set()).add(node.op_type)
    outputs = {o.name for o in graph.output}
    book.dead = [name for name in book.nodes if name not in book.readers and name not in outputs]
    for name, node in book.nodes.items():
        if node.op_type != "Constant" and name not in inits:
            value = known(name)
            book.index.setdefault(_key(value), []).append((name, value))
            if "Reshape" in book.readers.get(name, ()) and value.ndim == 1 and \
                    (value <= 0).any():
                book.values[name] = value
                book.targets.setdefault(len(value), []).append(name)
    book.placeholders = len(importer.placeholders)
    for p in importer.placeholders.values():
        _BOOKS[p] = book  # the latest import of equal inputs (interned nodes) wins


def _recipe_node(importer, known: _Known, node, made: set[str], inits: set[str],
                 book: Book) -> bool:
    """Whether the node computes known small values from recipes and leaves (recording it
    and its leaves in the book)."""
    if node.domain not in ("", "ai.onnx") or any(a.type in (5, 10) for a in node.attribute):
        return False
    outs = [o for o in node.output if o]
    if not outs or any(known(o) is None for o in outs):
        return False
    leaves: dict[str, tuple] = {}
    for i, x in enumerate(node.input):
        if not x or x in made:
            continue
        if x in inits and known(x) is not None:
            leaves[x] = ("init", known(x))
        elif _SHAPE_READERS.get(node.op_type) == i:
            leaf = _live(importer, x)
            if leaf is None or (node.op_type == "CastLike" and leaf[0] != "input"):
                return False  # (a type: a graph input's, of its name, is the one read)
            leaves[x] = leaf
        else:
            return False
    for x, (kind, what) in leaves.items():
        if kind == "init":
            book.inits[x] = what
        elif kind == "input":
            book.inputs[x] = what
        else:
            book.live[x] = what

    copy = proto.NodeProto()
    copy.CopyFrom(node)
    for o in outs:
        book.nodes[o] = copy
    return True


def _live(importer, name: str) -> tuple | None:
    """A value read by its shape: a graph input, or a value the graph computes."""
    t = importer.values.get(name)
    if t is None or not hasattr(t, "axes"):
        return None
    shape = tuple(int(a.length) for a in t.axes)
    if name in importer.placeholders:
        return "input", shape
    return "live", (weakref.ref(t.node), tuple(t.axes))


class _Known:
    """The values the importer knows (small, not from a symbol), each computed once."""

    def __init__(self, importer):
        self.importer = importer
        self.cache: dict[str, np.ndarray | None] = {}
        self.memo: dict = {}

    def __call__(self, name: str) -> np.ndarray | None:
        if name not in self.cache:
            self.cache[name] = self._value(name)
        return self.cache[name]

    def _value(self, name: str) -> np.ndarray | None:
        folding = self.importer.folding
        if name in folding.symbolic:
            return None
        value = folding.consts.get(name)
        if value is None:
            value = _ir_constant(self.importer.values.get(name), self.memo)
        if value is None or value.size > LIMIT:
            return None
        return np.asarray(value)


def _ir_constant(t, memo: dict) -> np.ndarray | None:
    """The value of an imported tensor computed from constants alone (small, every node on
    the way small: the exporter folds it so), in ONNX's order of dimensions."""
    if t is None or not hasattr(t, "axes") or not _from_constants(t.node, memo):
        return None
    from ngrules.errors import NgrulesError
    from ngrules.ir.executor import execute

    try:
        return np.asarray(execute([t.ordered()], {})[0])
    except (NgrulesError, ArithmeticError, ValueError):  # not computable here: not recorded
        return None


def _from_constants(node: Node, memo: dict) -> bool:
    """Whether every node under this one is small and its leaves are Constants."""
    stack = [node]
    while stack:
        n = stack[-1]
        if n in memo:
            stack.pop()
            continue
        if n.outputs is not None or n.axes.size > LIMIT or (not n.args and n.op != "Constant"):
            memo[n] = False
            stack.pop()
            continue
        pending = [a for a in n.args if a not in memo]
        if pending:
            stack.extend(pending)
            continue
        memo[n] = all(memo[a] for a in n.args)
        stack.pop()
    return memo[node]


def _forget(inputs) -> None:
    """A rewrite folded the constants of the graph of these placeholders: its values are
    constants on purpose, so the records of its import are dropped (the round trip with no
    rule keeps them)."""
    if _BOOKS:
        for n in inputs:
            _BOOKS.pop(n, None)


on_fold(_forget)


def books(order) -> list[Book]:
    """The recipes recorded for the graph being written: those of the import whose graph
    inputs are exactly its placeholders (none when it mixes imports)."""
    placeholders = [n for n in order if n.op == "Placeholder"]
    found = {id(b): b for n in placeholders if (b := _BOOKS.get(n)) is not None}
    if len(found) != 1:
        return []
    book = next(iter(found.values()))
    return [book] if book.placeholders == len(placeholders) and \
        all(_BOOKS.get(n) is book for n in placeholders) else []
