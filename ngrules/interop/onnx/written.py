"""A written model's nodes as a graph that passes over written nodes rewrite: who reads and
who makes each value, the values' shapes and constants, chains replaced by one node."""

from __future__ import annotations

from dataclasses import dataclass, field

from ngrules.interop.onnx import ndarrays, proto


@dataclass
class WrittenGraph:
    """The model's nodes with who reads each value, the values' shapes and the constants."""

    nodes: list
    outputs: set[str]
    shapes: dict[str, tuple]
    constants: dict[str, tuple]  # name -> shape of an initializer
    _readers: dict[str, list] = field(default_factory=dict)
    producer: dict[str, object] = field(default_factory=dict)
    dropped: set[int] = field(default_factory=set)

    def __post_init__(self):
        for node in self.nodes:
            self.add(node)

    def add(self, node) -> None:
        for x in node.input:
            self._readers.setdefault(x, []).append(node)
        self.producer.update((y, node) for y in node.output)

    def readers(self, value: str) -> list:
        return [n for n in self._readers.get(value, []) if id(n) not in self.dropped]

    def only_reader(self, value: str):
        """The one node reading `value`, if it is read once and is not an output."""
        readers = self.readers(value)
        if len(readers) != 1 or value in self.outputs:
            return None
        return readers[0]

    def read_instead(self, old: str, new: str) -> None:
        """Every reader of `old` reads `new` instead."""
        for node in self.readers(old):
            node.input[:] = [new if v == old else v for v in node.input]
            self._readers.setdefault(new, []).append(node)
        self._readers[old] = []

    def position(self, node) -> int:
        return next(i for i, n in enumerate(self.nodes) if n is node)

    def drop(self, *nodes) -> None:
        self.dropped.update(id(n) for n in nodes)


def replace(g: WrittenGraph, chain: list, fused, at) -> None:
    """`fused` takes the place of `at`, one node of the chain; the others go."""
    g.nodes[g.position(at)] = fused
    g.drop(*chain)
    g.add(fused)


def read(g: WrittenGraph, nodes: list) -> list:
    """The nodes an output still needs (a joined chain's Constant nodes are not)."""
    needed, kept = set(g.outputs), []
    for node in reversed(nodes):
        if any(y in needed for y in node.output):
            kept.append(node)
            needed.update(node.input)
    return kept[::-1]


class Weights:
    """The written model's constants by name (its initializers and the separate arrays), and
    new ones added where the exporter keeps such an array (`weights.separable`); `constants`
    (name -> shape, a `WrittenGraph`'s) learns the new ones."""

    def __init__(self, model, arrays: dict, constants: dict, fresh):
        self.model, self.arrays, self.constants, self.fresh = model, arrays, constants, fresh
        self.initializers = {t.name: t for t in model.graph.initializer}

    def value(self, name: str):
        if name in self.arrays:
            return self.arrays[name]
        t = self.initializers.get(name)
        return None if t is None else ndarrays.to_array(t)

    def add(self, array) -> str:
        from ngrules.interop.onnx.weights import separable

        name = self.fresh()
        if separable(array):
            self.arrays[name] = array
        else:
            self.initializers[name] = ndarrays.from_array(array, name)
            self.model.graph.initializer.append(self.initializers[name])
        self.constants[name] = array.shape
        return name

    def drop_unread(self, nodes: list) -> None:
        """Initializers and arrays no node reads any more (a folded Conv's old weights)."""
        read = {x for n in nodes for x in n.input} | {o.name for o in self.model.graph.output}
        kept = [t for t in self.model.graph.initializer if t.name in read]
        del self.model.graph.initializer[:]
        self.model.graph.initializer.extend(kept)
        for name in [k for k in self.arrays if k not in read]:
            del self.arrays[name]


def attribute(node, name: str, default=None):
    """A written node's attribute `name`, or `default`."""
    return next((proto.get_attribute_value(a) for a in node.attribute if a.name == name),
                default)


def attributes(node) -> dict:
    """A written node's attributes, name -> value (to copy onto the node replacing it)."""
    return {a.name: proto.get_attribute_value(a) for a in node.attribute}


def is_standard(node, *ops: str) -> bool:
    """Whether `node` is one of the standard-domain ops `ops`."""
    return node is not None and node.domain in ("", "ai.onnx") and node.op_type in ops
