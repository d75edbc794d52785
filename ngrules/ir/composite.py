"""Composite ops: an op read from another format (ONNX's `LRN`, `LayerNormalization`, ...) kept
as one node, its decomposition into primitives as its body.

A composite node carries what its format needs to write it back (`spec`, the format's own text
of the node, and `opset`) and its output's `axes` and `dtype`; its arguments are its tensor
inputs. The format's reader registers a `build(node, args)` that writes the body on any argument
nodes of the node's types; from it come the kernel (the body run by the executor), the gradient
(autodiff through the body) and what verification and proofs see. The graph keeps the node
whole until the built-in pass `decompose` (every composite) or `decompose_<Op>` (one op) lowers
it; `decompose` records each body it wrote, so a writer finding a body no rule changed writes the
composite node back instead (`recorded`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection, Sequence

from ngrules.errors import NgrulesError, OpError
from ngrules.ir.graph import Node, creation_order, make_node
from ngrules.ir.ops import OPS, READ_FROM_MODELS, AttrSpec, register_op
from ngrules.ir.values import constant_source
from ngrules.records import frozen

#: The name of the built-in pass lowering every composite; `decompose_<Op>` lowers one op.
PASS_NAME = "decompose"
#: The built-in pass making bodies no rule changed their composite again (`recompose`).
RECOMPOSE = "recompose"

#: Attributes every composite op has.
ATTRS = (
    AttrSpec("spec", "str", doc="the node as its format writes it (ONNX: protobuf text)"),
    AttrSpec("opset", "int", 0, doc="the version of the format's op set the node was read at"),
    AttrSpec("axes", "axes", doc="the output's axes, in the format's order of dimensions"),
    AttrSpec("dtype", "dtype", doc="the output's dtype"),
    AttrSpec("output", "int", 0, doc="which output of the format's node this node is"),
)


@frozen
class Composite:
    """One composite op: `build(node, args)` is its body written on `args` (nodes of the types
    of node.args); `domain` the format's domain of the op (`ai.onnx` as '')."""

    name: str
    build: Callable[[Node, Sequence[Node]], Node]
    domain: str = ""


#: op name -> its composite definition.
COMPOSITES: dict[str, Composite] = {}

#: body root written by `decompose` -> the composite node it stands for.
_RECORDED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def is_composite(op: str) -> bool:
    return op in COMPOSITES


def stand_ins(node: Node) -> list[Node]:
    """One placeholder per argument of node, of its axes and dtype."""
    return [make_node("Placeholder", name=f"{node.op}.{i}", axes=a.axes, dtype=a.dtype)
            for i, a in enumerate(node.args)]


def body(node: Node, args: Sequence[Node] | None = None) -> Node:
    """The node's decomposition on `args` (default: its own arguments)."""
    out = COMPOSITES[node.op].build(node, tuple(node.args if args is None else args))
    if out.axes != node.axes or out.dtype != node.dtype:
        raise OpError(f"the body of {node.op} has axes {out.axes!r} {out.dtype}, "
                      f"not the node's {node.axes!r} {node.dtype}")
    return out


def _infer(args, attrs):
    return attrs["axes"], attrs["dtype"]


def _kernel(node: Node):
    from ngrules.ir.executor import Program

    places = stand_ins(node)
    program = Program([body(node, places)])
    read = [p in program.placeholders for p in places]

    def run(*arrays):
        return program.run({p: a for p, a, r in zip(places, arrays, read) if r})[0]

    return run


def _grad(node: Node, delta):
    from ngrules.ir.autodiff import adjoints_through

    places = stand_ins(node)
    return adjoints_through(places, (body(node, places),), node.args, (delta,), node.op)


def _gen(draw, leaf):
    from hypothesis import reject

    reject()  # instances come from models read, not drawn


def register_composite(name: str, build: Callable, domain: str = "", doc: str = "") -> None:
    """Make `name` a composite op (once per process; a second call is a no-op, unless the op
    table was reset since, as tests that restore it do: then it is entered again)."""
    if name in COMPOSITES and name in OPS:
        return
    if name in OPS:  # not ours: a composite is entered in both tables at once
        raise OpError(f"composite op {name} would shadow the op of that name")
    register_op(name, arity=None, infer=_infer, kernel=_kernel, grad=_grad, gen=_gen,
                attrs=ATTRS, doc=doc or f"{name}, read from a model and kept whole")
    COMPOSITES[name] = Composite(name, build, domain)
    READ_FROM_MODELS.add(name)


def recorded(node: Node) -> Node | None:
    """The composite node whose body `decompose` wrote as `node`, if it did."""
    return _RECORDED.get(node)


#: The pass name lowering the composites whose body is one op that computes (`simple`).
SIMPLE = "simple"


def simple(body_root: Node, args) -> bool:
    """Whether a body computes with one node (the rest views and constants): an op the IR has
    one primitive for, which rules read as that primitive."""
    return len(computing(body_root, args, limit=2)) <= 1


def computing(body_root: Node, args, limit: int | None = None) -> list[Node]:
    """The nodes of a body on `args` that compute (not views, not leaves); the first `limit`
    found, when given (a body reading past its arguments, as a batchnorm reads the input of a
    convolution's slice, would otherwise be walked up to the graph's inputs)."""
    from ngrules.ir.ops import get_op

    inputs, found, stack, seen = set(args), [], [body_root], set()
    while stack and len(found) != limit:
        n = stack.pop()
        if n in seen or n in inputs or not n.args:
            continue
        seen.add(n)
        if not get_op(n.op).has("view"):
            found.append(n)
        stack.extend(n.args)
    return found


def decompose(outputs: Sequence[Node], ops: Sequence[str] | None = None,
              record: bool = True, where: Callable[[Node], bool] | None = None) -> list[Node]:
    """The graph with each composite node (of `ops`, if given; `[SIMPLE]`: those whose body is
    one primitive) replaced by its body. With `record`, a writer writes a body no rule changed
    as its composite (nodes are shared: the same primitives built by hand are that body too).
    `where(node)` picks the composite nodes to lower instead of `ops` (True, or the node's body
    when it built it; False or None to keep the node)."""
    memo: dict[Node, Node] = {}
    wanted = None if ops is None else set(ops)
    for node in creation_order(outputs):
        whole = _RECORDED.get(node)
        if whole is not None and any(memo.get(a, a) is not a for a in whole.args):
            memo[node] = _lower(whole.with_args(tuple(memo.get(a, a) for a in whole.args)),
                                record=record)
            continue  # a body an earlier decompose wrote, lowered again on its new arguments
        rebuilt = node.with_args(tuple([memo[a] for a in node.args])) if node.args else node
        if where is not None:
            picked = where(rebuilt) if node.op in COMPOSITES else False
            if picked is not False and picked is not None:  # True, or the body it built
                rebuilt = _lower(rebuilt, picked if isinstance(picked, Node) else None, record)
            memo[node] = rebuilt
            continue
        if node.op in COMPOSITES and (wanted is None or node.op in wanted or SIMPLE in wanted):
            lowered = body(rebuilt)
            if wanted is not None and node.op not in wanted and not simple(lowered, rebuilt.args):
                memo[node] = rebuilt
                continue
            rebuilt = _lower(rebuilt, lowered, record)
        memo[node] = rebuilt
    return [memo[o] for o in outputs]


def _lower(whole: Node, lowered: Node | None = None, record: bool = True) -> Node:
    """The body of a composite node, recorded (if asked) as standing for it."""
    lowered = body(whole) if lowered is None else lowered
    if record and lowered not in whole.args:  # an identity (a Dropout) stands for no node
        _RECORDED[lowered] = whole
    return lowered


def record(node: Node, whole: Node) -> None:
    """Record `node` (of whole's value, its body's structure) as standing for composite
    `whole`."""
    _RECORDED[node] = whole


def forget(constants: Collection[Node]) -> None:
    """Forget the bodies recorded for composites that read any of `constants` (through views):
    a rewrite wrote other values over them (`engine.spending`), so no pass may bring a
    composite over them back."""
    gone = set(constants)
    for node, whole in list(_RECORDED.items()):
        if any(constant_source(a) in gone for a in whole.args):
            del _RECORDED[node]


def carry(old: Node, new: Node, memo) -> None:
    """Record `new`, old rebuilt by a pass that changes no value (`canonical_layout`), as
    standing for the composite node old stood for, on its arguments' images in `memo`."""
    whole = _RECORDED.get(old)
    if whole is not None and new is not old and new not in _RECORDED:
        _RECORDED[new] = whole.with_args(tuple(memo.get(a, a) for a in whole.args))


def pass_ops(name: str) -> list[str] | None | bool:
    """For a pass name: None for `decompose` (every op), [Op] for `decompose_Op`, False for
    any other name."""
    if name == PASS_NAME:
        return None
    prefix = PASS_NAME + "_"
    if name.startswith(prefix) and name[len(prefix):].isidentifier():
        return [name[len(prefix):]]
    return False


def recompose(outputs: Sequence[Node]) -> list[Node]:
    """The graph with each body `decompose` wrote that no rule changed replaced by its
    composite node again (what a writer writes: the op as it was read), a body rebuilt on new
    arguments (a rule rewrote a node it reads: a convolution a batchnorm was folded into, before
    a classifier's Gemm) too."""
    if not _RECORDED:
        return list(outputs)
    memo: dict[Node, Node] = {}
    roots: dict | None = None
    recorded = dict(_RECORDED.items()).get  # (a plain dict: no weak reference per lookup)
    for node in creation_order(outputs):
        whole = recorded(node)
        if whole is None and node.args:
            if roots is None:
                roots = _recorded_by_key()
            whole = _rebuilt_body(node, roots.get((node.op, node._key[2]), ()))
        whole = node if whole is None else whole
        args = tuple([memo.get(a, a) for a in whole.args])
        memo[node] = whole.with_args(args) if args else whole
    return [memo[o] for o in outputs]


def _recorded_by_key() -> dict[tuple, list[tuple[Node, Node, frozenset]]]:
    """Recorded (body root, composite, the composite's arguments) by the root's op and
    attributes."""
    out: dict[tuple, list[tuple[Node, Node, frozenset]]] = {}
    for root, whole in list(_RECORDED.items()):
        out.setdefault((root.op, root._key[2]), []).append((root, whole, frozenset(whole.args)))
    return out


def _rebuilt_body(node: Node, candidates) -> Node | None:
    """The composite whose recorded body `node` is, on other computed arguments of the same
    types (its leaves the same): the same ops and attributes down to the composite's
    arguments, and its body built on them of node's axes and type."""
    args = node.args
    for root, whole, frontier in candidates:
        if root not in frontier and (len(root.args) != len(args)
                                     or not _may_be(root.args, args, frontier)):
            continue
        bound: dict[Node, Node] = {}
        if _same_body(root, node, frontier, bound) and bound:
            candidate = whole.with_args(tuple(bound.get(a, a) for a in whole.args))
            if _body_is(candidate, node):
                return candidate
    return None


def _may_be(old_args: tuple, new_args: tuple, frontier) -> bool:
    """What `_same_body` asks first of the arguments of a root not in the frontier and of
    node (same op and attributes): False where it would fail at once (most candidates),
    without its stack (it asks more: True here decides nothing)."""
    for old, new in zip(old_args, new_args):
        if old in frontier:
            if (not old.args and old is not new) or old.axes != new.axes \
                    or old.dtype != new.dtype:
                return False
        elif old is not new and old.op != new.op:
            return False
    return True


def _body_is(candidate: Node, node: Node) -> bool:
    """Whether the composite node `candidate` lowers on its arguments to a value of node's
    axes and type (a body recorded by another import may match node's ops and attributes and
    still not fit these arguments: its reader refuses them)."""
    try:
        lowered = body(candidate)
        return lowered.axes == node.axes and lowered.dtype == node.dtype
    except NgrulesError:  # the reader refuses these arguments: not this body
        return False


def _same_body(old: Node, new: Node, frontier: Collection[Node], bound: dict) -> bool:
    """Whether `new` is `old` with the frontier's nodes (the composite's arguments) replaced by
    those `bound` records (filled here). A leaf there (a weight) must stay: a rule that scaled
    it wrote its bias beside the product, which the writer joins to a raised Gemm or Conv.
    Each pair of nodes below the two is compared once (no recursion: the pairs on a stack)."""
    stack, seen = [(old, new)], set()
    while stack:
        old, new = stack.pop()
        if old in frontier:
            if (not old.args and old is not new) or bound.setdefault(old, new) is not new \
                    or old.axes != new.axes or old.dtype != new.dtype:
                return False
            continue
        if old is new:
            continue
        pair = (id(old), id(new))
        if pair in seen:
            continue
        seen.add(pair)
        args = old.args
        if old.op != new.op or old._key[2] != new._key[2] or len(args) != len(new.args):
            return False
        stack.extend(zip(args, new.args))
    return True
