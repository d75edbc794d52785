"""The graph IR: immutable, hash-consed nodes over named axes.

A `Node` is an op applied to argument nodes with attributes; its output axes and dtype are
inferred from the op table when it is built. Building the same op on the same arguments and
attributes twice returns the same node (hash-consing), so structural equality is identity and
common subexpressions are shared by construction. Nothing here recurses on graph depth.
"""

from __future__ import annotations

import gc
import itertools
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

import numpy as np

from ngrules.errors import GraphError, OpError
from ngrules.ir.arraykey import ArrayKey
from ngrules.ir.axes import Axes, Axis
from ngrules.ir.graphtext import format_graph, format_node  # noqa: F401 - re-exported
from ngrules.ir.ops import OPS, get_op, normalize_attrs
from ngrules.ir.traversal import creation_order, toposort, users_of  # noqa: F401 - re-exported

#: The hash-consing table: key -> weak reference to the live node. Plain `weakref.ref`s (no
#: callbacks: a dying node costs nothing); dead entries are swept when the table has doubled.
_INTERN: dict[tuple, weakref.ref] = {}
_NO_ATTRS: Mapping[str, Any] = MappingProxyType({})

#: A node's cached constant value before it is first asked for (see `values.known_scalar`).
UNKNOWN = object()

#: When a list, every newly created node is appended to it (the engine's provenance record).
creation_log: list | None = None


def _freeze(value: Any) -> Any:
    """A hashable stand-in for an attribute value that keeps every length and array byte."""
    if isinstance(value, float):  # first: the commonest value; 1.0 must not be the key of 1
        return ("float", value)
    if isinstance(value, Axes):  # a plain Axis's key in line (the commonest: half the time)
        return tuple([(a.name, a.length, None) if a.__class__ is Axis else _freeze(a)
                      for a in value])
    if isinstance(value, Axis):
        comps = getattr(value, "components", None)
        return (value.name, value.length, _freeze(comps) if comps is not None else None)
    if isinstance(value, np.ndarray):
        return ArrayKey(value)
    if isinstance(value, np.dtype):
        return ("dtype", value.str)
    return value


#: The front end's builders behind `Node`'s Python operators (`x + y` is `add(x, y)`): the
#: front end fills this when it is imported, so the graph core never imports its builders.
OPERATORS: dict[str, Callable[..., Node]] = {}


class Node:
    """One op applied to argument nodes; immutable and hash-consed.

    `.op` is the op's name, `.args` the argument nodes, `.attrs` a read-only mapping, `.axes`
    and `.dtype` the output's type. A multi-output node has `.outputs` (a tuple of
    (axes, dtype)) and is read through `Output` nodes; its own `.axes` is empty.
    `.origin` names the rule that created the node, if a rewrite did.
    """

    __slots__ = (
        "op",
        "args",
        "attrs",
        "axes",
        "dtype",
        "outputs",
        "origin",
        "_key",
        "_scalar",
        "_serial",
        "__weakref__",
    )

    op: str
    args: tuple[Node, ...]
    attrs: Mapping[str, Any]
    axes: Axes
    dtype: np.dtype | None
    outputs: tuple[tuple[Axes, np.dtype], ...] | None
    origin: Any

    def __setattr__(self, key, value):
        if key != "origin":
            raise AttributeError("nodes are immutable")
        object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        label = self.attrs.get("name") if self.attrs else None
        label = f" {label}" if isinstance(label, str) else ""
        return f"<{self.op}{label} {self.axes!r} {self.dtype}>"

    def __reduce__(self):
        raise TypeError("nodes are not picklable; use ngrules.save_graph")

    # -- convenience -------------------------------------------------------------------------
    @property
    def name(self) -> str | None:
        """The name of a placeholder or variable (None for other nodes)."""
        value = self.attrs.get("name")
        return value if isinstance(value, str) else None

    @property
    def is_scalar(self) -> bool:
        return self.outputs is None and len(self.axes) == 0

    def with_args(self, args: tuple[Node, ...]) -> Node:
        """The same op and attributes on new arguments of the same types (no re-inference).
        The rebuilt node keeps the rule that made this one, if any (provenance survives)."""
        if args == self.args:
            return self
        node, fresh = rebuilt_on(self, args)
        return register(node) if fresh else node

    # -- Python operators: the front end's builders, with ngraph's elementwise broadcasting ------
    def __add__(self, other):
        return OPERATORS["add"](self, other)

    def __radd__(self, other):
        return OPERATORS["add"](other, self)

    def __sub__(self, other):
        return OPERATORS["subtract"](self, other)

    def __rsub__(self, other):
        return OPERATORS["subtract"](other, self)

    def __mul__(self, other):
        return OPERATORS["multiply"](self, other)

    def __rmul__(self, other):
        return OPERATORS["multiply"](other, self)

    def __truediv__(self, other):
        return OPERATORS["divide"](self, other)

    def __rtruediv__(self, other):
        return OPERATORS["divide"](other, self)

    def __neg__(self):
        return OPERATORS["negative"](self)

    def __getitem__(self, item):
        """`x[1, 2:5]`: ngraph's tensor_slice (an int removes its axis)."""
        return OPERATORS["getitem"](self, item)


#: Numbers nodes in the order they are created: a node's arguments exist before it, so this
#: order is topological (see `creation_order`).
_next_serial = itertools.count().__next__


class _Building(Node):
    """A node under construction: plain slot stores (fast), then it becomes a `Node`."""

    __slots__ = ()
    __setattr__ = object.__setattr__

    def __init__(self, op, args, attrs, axes, dtype, outputs, key, origin=None):
        self.op = op
        self.args = args
        self.attrs = attrs
        self.axes = axes
        self.dtype = dtype
        self.outputs = outputs
        self.origin = origin
        self._scalar = UNKNOWN
        self._key = key
        self._serial = _next_serial()
        self.__class__ = Node


#: The table's size at which its dead entries are next swept (each time it has doubled).
_SWEEP_AT = [100_000]


def _lookup(key) -> Node | None:
    """The live node with this key, if any."""
    ref = _INTERN.get(key)
    return None if ref is None else ref()


def register(node: Node) -> Node:
    """Enter a new node (from `make_node` or `rebuilt_on`) in the table; its key must still be
    free (nothing with that key was built since the lookup)."""
    _INTERN[node._key] = weakref.ref(node)
    if len(_INTERN) > _SWEEP_AT[0] or creation_log is not None:
        _entered(node)
    return node


def _entered(node: Node) -> None:
    """What an insert may call for: a sweep of the table, the node in the creation log."""
    if len(_INTERN) > _SWEEP_AT[0]:
        _sweep(_INTERN)
    if creation_log is not None:
        creation_log.append(node)


def _sweep(table: dict) -> None:
    """Remove the dead entries. A dead key still holds its node's arguments: the entries of those
    it frees are removed next, down to the leaves, so one sweep frees a whole dead graph."""
    dead = [k for k, r in table.items() if r() is None]
    while dead:
        below = _remove(table, dead)  # returns once nothing refers to the removed keys
        dead = [k for k, r in below.items() if r() is None and k in table and table[k]() is None]
    _SWEEP_AT[0] = max(2 * len(table), 100_000)


def _remove(table: dict, dead: list[tuple]) -> dict[tuple, weakref.ref]:
    """Delete the dead keys (emptying `dead`); weak references to their arguments, by key."""
    below: dict[tuple, weakref.ref] = {}
    for key in dead:
        for arg in key[1]:
            below[arg._key] = weakref.ref(arg)
        del table[key]
    dead.clear()
    return below


def rebuilt_on(node: Node, args: tuple[Node, ...]) -> tuple[Node, bool]:
    """`node` on new arguments of the same types, and whether it is a new, unregistered node.

    The live node with that key is returned if there is one (given `node`'s provenance if it
    has none). Otherwise the node is built but not registered: the engine tries its rules on it
    first and registers it only if it stays, so a node that a rule replaces at once is never
    interned.
    """
    key = (node.op, args, node._key[2])
    ref = _INTERN.get(key)
    if ref is not None:
        found = ref()
        if found is not None:
            if found.origin is None and node.origin is not None:
                found.origin = node.origin
            return found, False
    op, origin = node.op, node.origin
    return _Building(op, args, node.attrs, node.axes, node.dtype, node.outputs, key, origin), True


#: The hash-consing table's reference to the live node with a key, if any: for the engine's
#: walk, which looks a rebuilt node up and may build it later with the same key. A node's key
#: is `(op, args, attributes' key)`: on new arguments, `(node.op, args, node._key[2])`.
interned_ref = _INTERN.get


def fresh_on(node: Node, args: tuple[Node, ...]) -> Node:
    """`node` on new arguments, built unregistered with no lookup: for a caller that knows,
    from `live_rebuilt`, that no live node has that key."""
    key = (node.op, args, node._key[2])
    op, origin = node.op, node.origin
    return _Building(op, args, node.attrs, node.axes, node.dtype, node.outputs, key, origin)


def registered_on(node: Node, args: tuple[Node, ...], key: tuple) -> Node:
    """`register(fresh_on(node, args, key))` in one call (the walk's commonest new node)."""
    node = _Building(node.op, args, node.attrs, node.axes, node.dtype, node.outputs, key,
                     node.origin)
    _INTERN[key] = weakref.ref(node)
    if len(_INTERN) > _SWEEP_AT[0] or creation_log is not None:
        _entered(node)
    return node


def live_rebuilt(node: Node, args: tuple[Node, ...]) -> Node | None:
    """The live node `rebuilt_on(node, args)` would find (given node's provenance if it has
    none), or None: then nothing is built, so a caller that may not need the node saves it."""
    ref = _INTERN.get((node.op, args, node._key[2]))
    found = None if ref is None else ref()
    if found is not None and found.origin is None and node.origin is not None:
        found.origin = node.origin
    return found


def make_node(op: str, args: Sequence[Node] = (), **attrs: Any) -> Node:
    """Build (or find) the node `op(args, attrs)`, inferring its axes and dtype."""
    opdef = get_op(op)
    args = tuple(args)
    if opdef.arity is not None and len(args) != opdef.arity:
        raise OpError(f"{op} takes {opdef.arity} argument(s), got {len(args)}")
    for a in args:
        if not isinstance(a, Node):
            raise OpError(f"{op}: arguments must be nodes, got {type(a).__name__}")
        if a.outputs is not None and op != "Output":
            raise OpError(f"{op}: {a.op} has several outputs; pick one with Output(..., index=i)")
    floats = _float_attrs(op, opdef, attrs) if attrs else None
    if floats is not None:
        norm, attrs_key = floats
    else:
        norm = normalize_attrs(opdef, attrs) if (attrs or opdef.attrs) else {}
        attrs_key = tuple([(k, _freeze(v)) for k, v in norm.items()])
    existing = _lookup(key := (op, args, attrs_key))
    if existing is not None:
        return existing
    return _new_node(op, opdef, args, norm, key)


#: The classes of the dtypes seen (np.dtype's subclasses, one per kind of dtype).
_DTYPE_CLASSES: set[type] = set()


def _new_node(op: str, opdef, args: tuple, norm: dict, key: tuple) -> Node:
    """The node of a free key, its type inferred, entered in the table."""
    inferred = opdef.infer(args, norm)
    if opdef.outputs > 1:
        outputs = tuple((ax, np.dtype(dt)) for ax, dt in inferred)
        axes, dtype = Axes(), None
    else:
        (axes, dtype), outputs = inferred, None
        if dtype.__class__ not in _DTYPE_CLASSES:  # np.dtype(d) is d: a call (and isinstance)
            dtype = np.dtype(dtype)  # costs 8x this test
            _DTYPE_CLASSES.add(dtype.__class__)
    frozen = MappingProxyType(norm) if norm else _NO_ATTRS
    return register(_Building(op, args, frozen, axes, dtype, outputs, key))


def make_with_floats(op: str, args: tuple, names: tuple[str, ...], values: tuple) -> Node:
    """`make_node(op, args, **dict(zip(names, values)))`, for generated code that names the
    attributes (a fused op's `eps`): when they are the op's attributes, all floats, in order,
    each given as a Python float, and the arguments are single-output nodes of the op's
    arity, the key is formed here (no keyword dicts, no checks that cannot fail); anything
    else goes through `make_node`, which also raises its errors."""
    opdef = OPS.get(op)
    entry = _FLOAT_ATTRS.get(op)
    if entry is None or entry[0] is not opdef or entry[1] != names or len(args) != opdef.arity:
        return make_node(op, args, **dict(zip(names, values)))
    for a in args:
        if a.__class__ is not Node or a.outputs is not None:
            return make_node(op, args, **dict(zip(names, values)))
    attrs_key = _float_key(names, values)
    if attrs_key is None:
        return make_node(op, args, **dict(zip(names, values)))
    existing = _lookup(key := (op, args, attrs_key))
    if existing is not None:
        return existing
    return _new_node(op, opdef, args, dict(zip(names, values)), key)


#: op name -> (its OpDef, its attributes' names if every one is a float, else None).
_FLOAT_ATTRS: dict[str, tuple] = {}


def _float_attrs(op: str, opdef, attrs: dict) -> tuple[dict, tuple] | None:
    """The normalised attributes and their key for an op whose attributes are all floats, each
    given as a Python float (a fused op's `eps`): what `normalize_attrs` and `_freeze` return
    for them, without their conversions and checks. None for anything else."""
    entry = _FLOAT_ATTRS.get(op)
    if entry is None or entry[0] is not opdef:
        specs = opdef.attrs
        names = tuple(a.name for a in specs) if all(a.kind == "float" for a in specs) else None
        entry = _FLOAT_ATTRS[op] = (opdef, names)
    names = entry[1]
    if names is None or len(attrs) != len(names):
        return None
    values = [attrs.get(name) for name in names]
    key = _float_key(names, values)
    return None if key is None else (dict(zip(names, values)), key)


def _float_key(names: Sequence[str], values: Sequence) -> tuple | None:
    """The attributes' key (what `_freeze` gives them) when every value is a Python float;
    None otherwise."""
    key = []
    for name, value in zip(names, values):
        if value.__class__ is not float:
            return None
        key.append((name, ("float", value)))
    return tuple(key)


@contextmanager
def paused_gc():
    """Pause the cyclic garbage collector around whole-graph work.

    Graphs are acyclic and freed by reference counting; with hundreds of thousands of live
    nodes, the collector's repeated scans would otherwise dominate the run time.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def substitute(outputs: Sequence[Node], mapping: Mapping[Node, Node]) -> list[Node]:
    """The outputs with every node in `mapping` replaced, rebuilding each user once."""
    for old, new in mapping.items():
        if node_type(old) != node_type(new):
            raise GraphError(f"cannot replace {old!r} by {new!r}: the axes or dtype differ")
    memo: dict[Node, Node] = dict(mapping)
    for node in toposort(outputs):
        if node in memo:
            continue
        memo[node] = node.with_args(tuple(memo[a] for a in node.args)) if node.args else node
    return [memo[o] for o in outputs]


def _exact_type(axes: Axes, dtype) -> tuple:
    """Axes names and lengths and the dtype (comparing Axes alone ignores the lengths)."""
    return tuple((a.name, a.length) for a in axes), np.dtype(dtype)


def node_type(node: Node) -> tuple:
    """The node's output type(s), for exact comparison: lengths and every output count."""
    if node.outputs is not None:
        return tuple(_exact_type(ax, dt) for ax, dt in node.outputs)
    return _exact_type(node.axes, node.dtype)


def validate(outputs: Iterable[Node]) -> None:
    """Re-infer every node's axes and dtype from the op table; raise on any disagreement.

    Also: no two placeholders share a name, so feeds by name are clear.
    """
    names: dict[str, Node] = {}
    for node in toposort(outputs):
        if node.op == "Placeholder":
            name = node.attrs["name"]
            other = names.setdefault(name, node)
            if other is not node:
                raise GraphError(f"two placeholders are named {name!r}: {other!r} and {node!r}")
        opdef = get_op(node.op)
        if opdef.arity is not None and len(node.args) != opdef.arity:
            raise GraphError(
                f"{node!r} has {len(node.args)} arguments, {node.op} takes {opdef.arity}"
            )
        try:
            inferred = opdef.infer(node.args, dict(node.attrs))
        except OpError as e:
            raise GraphError(f"{node!r} is ill-formed: {e.message}") from None
        if node.outputs is not None:
            ok = tuple(_exact_type(ax, dt) for ax, dt in inferred) == node_type(node)
        else:
            ok = _exact_type(*inferred) == node_type(node)
        if not ok:
            raise GraphError(f"{node!r}: stored type differs from re-inferred {inferred!r}")
