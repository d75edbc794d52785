"""Proofs for every shape: axes grouped by role, one axis standing for each group (issue 35).

After TensorRight (POPL 2025): the axes of a rule's tensors fall into groups by the role they
play (reduced by this `Sum`, contracted by this `Dot`, kept, broadcast away, on x's side of a
`Dot` or y's). When every op of both sides treats an axis by its name only (elementwise ops,
`Broadcast`, `ReorderAxes`, `Reverse`, `Sum`, `Max`, `Min`, `Dot`) and the rule's text reads
axes only as wholes (no indexing, slicing, sizes, flattening, positions), a group of k axes
behaves as one axis whose length is their product (reversing each axis of a group reverses
the group): so a proof with one axis per group, of any length, is a
proof for every rank and every length (the reduction to rank 1 per group). `shapes` enumerates
every assignment of roles to at most `MAX_GROUPS` groups (not a sample), in every order of each
tensor's axes; `symbolic` proves each at a generic element, for every length.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import numpy as np
import z3

from ngrules.errors import NgrulesError
from ngrules.ir import declared
from ngrules.ir.axes import Axes, make_axis
from ngrules.ir.frontend import constant, placeholder
from ngrules.ir.graph import Node, make_node
from ngrules.ir.ops import OPS
from ngrules.lang.rules import Rule
from ngrules.lang.syntax import EAttr, EBinary, ECall, ENum, PLit, PNamed, POp, PVar
from ngrules.verification.instances.sampling import Instance, rewrite_instance
from ngrules.verification.prove.scalars import ENCODINGS
from ngrules.verification.prove.symbolic import Generic, Unsupported, element

#: Roles an axis may have at most (groups enumerated: one per role); distinct structures.
MAX_GROUPS, MAX_STRUCTURES = 4, 2500
#: Rule text that reads axes by position or size: the reduction to one axis per group fails.
POSITIONAL = re.compile(r"\[|\bsize\(|\.length|\.shape|\.size\b|\.names|flatten|Transpose"
                        r"|transpose|value\(|new_axis|Slice|\bpad\(|Flatten|DotLowDimension"
                        r"|Pad\b|make_axes")
UNIFORM = frozenset({"Broadcast", "ReorderAxes", "Reverse", "Sum", "Max", "Min", "Dot"})
#: Group lengths the structures are built at (a replacement that depends on them is refused).
LENGTH, OTHER_LENGTH = 2, 3


class NotUniform(Exception):
    """The rule is outside the fragment where one axis per group stands for every shape."""


def check_uniform(rule: Rule) -> None:
    """Raise NotUniform saying why the rule is outside the fragment."""
    if len(rule.roots) != 1:
        raise NotUniform("several roots")
    found = POSITIONAL.search(rule.source or "")
    if found:
        raise NotUniform("the rule reads axes by position or size, or a value "
                         f"(`{found.group(0)}`)")
    for p in _walk(rule.roots[0]):
        if isinstance(p, POp) and p.op not in UNIFORM and not _elementwise(p.op):
            raise NotUniform(f"{p.op} does not treat axes by name only")
        if isinstance(p, PVar) and p.kind not in (None, "scalar", "Constant", "constant"):
            raise NotUniform(f"a variable of kind {p.kind}")
    if not rule.source:
        raise NotUniform("the rule's text is not known")
    for expr in [c.expr for c in rule.clauses] + list(rule.replacement):
        for e in _exprs(expr):
            if _counts_axes(e):
                raise NotUniform("a number of axes read other than as none or some")


def _elementwise(op: str) -> bool:
    """Elementwise with an encoding and no attribute (the structures are built with one value
    of each: a `Relu`'s slope would be a sample)."""
    d = OPS.get(op)
    encoded = op in ENCODINGS or op in declared.DECLARATIONS  # a declaration: its body
    return encoded and d.has("elementwise") and not d.attrs


#: Comparisons of a number of axes that a group of several axes answers as one axis does.
_EMPTY_OR_NOT = {("==", 0), ("!=", 0), (">", 0), (">=", 1), ("<", 1), ("<=", 0)}


def _counts_axes(e) -> bool:
    return (isinstance(e, ECall) and e.func == "len") or (isinstance(e, EAttr)
                                                          and e.name == "rank")


def _exprs(e):
    """Every sub-expression but the comparisons of a count of axes with none or some
    (`len(r) == 0`, `c.rank > 0`): a group of several axes answers those as one axis does."""
    if isinstance(e, EBinary) and _counts_axes(e.left) and isinstance(e.right, ENum) \
            and (e.op, e.right.value) in _EMPTY_OR_NOT:
        return
    yield e
    for child in vars(e).values():
        items = child if isinstance(child, tuple) else (child,)
        for item in items:
            if isinstance(item, tuple):
                item = item[-1]  # a keyword argument
            if hasattr(item, "__dataclass_fields__") and not hasattr(item, "line"):
                yield from _exprs(item)


def _walk(p):
    yield p
    for child in getattr(p, "args", ()) or ((p.pattern,) if isinstance(p, PNamed) else ()):
        yield from _walk(child)


class _Shapes:
    """Graphs of the pattern with one axis per group, every role and order enumerated."""

    def __init__(self, length: int, hints):
        self.length, self.count = length, 0
        self.anyvalue: set[Node] = set()
        self.ranks = hints.ranks  # what the guards say of a variable's rank (`guard_hints`)
        self.same = [set(pair) for pair in hints.same]  # u.axes == v.axes

    def group(self) -> object:
        self.count += 1
        return make_axis(self.length, f"g{self.count}")

    def build(self, p, axes: tuple, env: dict, exact: bool = False) -> Iterator[tuple[Node, dict]]:
        """Nodes of p on these axes (in exactly this order if `exact`, else in any)."""
        for node, env2 in self._build(p, axes, env, exact):
            if not exact or tuple(node.axes) == tuple(axes):
                yield node, env2

    def _build(self, p, axes: tuple, env: dict, exact: bool) -> Iterator[tuple[Node, dict]]:
        if isinstance(p, PNamed):
            yield from self._named(p, axes, env, exact)
        elif isinstance(p, PVar):
            yield from self._var(p, axes, env, exact)
        elif isinstance(p, PLit):
            c = constant(p.value, dtype=np.float64)
            for order in [axes] if exact or not axes else _orders(axes):
                yield (make_node("Broadcast", (c,), axes=Axes(order)) if axes else c), env
        elif p.optional:
            yield from self.build(p.args[0], axes, env, exact)
            yield from self._op(p, axes, env, exact)
        else:
            yield from self._op(p, axes, env, exact)

    def _named(self, p, axes, env, exact):
        if p.name in env:
            if set(env[p.name].axes) == set(axes):
                yield env[p.name], env
            return
        for node, env2 in self.build(p.pattern, axes, env, exact):
            yield node, {**env2, p.name: node}

    def _var(self, p, axes, env, exact):
        if p.name in env and p.name != "_":
            if set(env[p.name].axes) == set(axes):
                yield env[p.name], env
            return
        low, high = self.ranks.get(p.name, (0, None))
        if (p.kind == "scalar" or high == 0) and axes or (low > 0 and not axes):
            return  # the guards (or the kind) refuse this rank: the rule would not fire
        orders = [axes] if exact else _orders(axes)
        for pair in (q for q in self.same if p.name in q):
            (other,) = pair - {p.name} or {p.name}
            if other in env:  # the guard holds only in the other's order
                orders = [o for o in orders if o == tuple(env[other].axes)]
        for order in orders:
            self.count += 1  # a node of its own: never the same as another's
            if p.kind in ("Constant", "constant"):
                node = constant(np.full([a.length for a in order], 0.5 + self.count),
                                order, dtype=np.float64)
                self.anyvalue.add(node)
            else:
                node = placeholder(order, dtype=np.float64, name=f"{p.name}{self.count}")
            yield node, {**env, p.name: node} if p.name != "_" else env

    def _op(self, p, axes, env, exact):
        if p.op in ("Broadcast", "ReorderAxes"):  # their own axes in every order
            subsets = itertools.product((True, False), repeat=len(axes)) \
                if p.op == "Broadcast" else [(True,) * len(axes)]
            for keep in subsets:
                inner = tuple(a for a, k in zip(axes, keep) if k)
                for arg, env2 in self.build(p.args[0], inner, env):
                    for order in [axes] if exact else _orders(axes):
                        yield from _made(p.op, (arg,), env2, axes=Axes(order))
        elif p.op in ("Sum", "Max", "Min"):
            for k in range(roles(p.args[0]) + 1):
                reduced = tuple(self.group() for _ in range(k))
                for arg, env2 in self.build(p.args[0], axes + reduced, env):
                    yield from _made(p.op, (arg,), env2, reduction_axes=Axes(reduced))
        elif p.op == "Dot":
            yield from self._dot(p, axes, env)
        elif p.op == "Reverse":  # each axis reversed or not (a group reversed: each of its axes)
            for flip in itertools.product((True, False), repeat=len(axes)):
                along = Axes(a for a, f in zip(axes, flip) if f)
                for arg, env2 in self.build(p.args[0], axes, env, exact):
                    yield from _made("Reverse", (arg,), env2, reverse_axes=along)
        else:  # elementwise: the operands in one order (the first's)
            yield from self._operands(p, list(p.args), axes, env, [], exact)

    def _operands(self, p, rest, axes, env, done, exact):
        if not rest:
            yield from _made(p.op, tuple(done), env)
            return
        order = tuple(done[0].axes) if done else axes
        for arg, env2 in self.build(rest[0], order, env, exact or bool(done)):
            yield from self._operands(p, rest[1:], axes, env2, [*done, arg], exact)

    def _dot(self, p, axes, env):
        for side in itertools.product((0, 1), repeat=len(axes)):
            xo = tuple(a for a, s in zip(axes, side) if s == 0)
            yo = tuple(a for a, s in zip(axes, side) if s == 1)
            for k in range(roles(p.args[0]) * roles(p.args[1]) + 1):
                shared = tuple(self.group() for _ in range(k))
                for x, env2 in self.build(p.args[0], xo + shared, env):
                    for y, env3 in self.build(p.args[1], shared + yo, env2):
                        yield from _made("Dot", (x, y), env3)


def roles(p) -> int:
    """How many roles an axis of p's result can play (which operands it reaches): a bound on
    the groups worth enumerating there (two groups of one role act as one); NotUniform above
    MAX_GROUPS."""
    if isinstance(p, PNamed):
        return roles(p.pattern)
    if not isinstance(p, POp):
        return 1
    inner = [roles(a) for a in p.args]
    if p.op == "Broadcast":
        n = inner[0] + 1
    elif p.op == "Dot":
        n = inner[0] + inner[1]
    elif p.op in ("Sum", "Max", "Min", "ReorderAxes"):
        n = inner[0]
    elif p.op == "Reverse":
        n = 2 * inner[0]
    else:
        n = int(np.prod(inner))
    if n > MAX_GROUPS:
        raise NotUniform(f"an axis of {p.op} has more than {MAX_GROUPS} roles")
    return n


def _orders(axes: tuple) -> list[tuple]:
    if len(axes) > 4:
        raise NotUniform("a tensor of more than 4 groups")
    return list(itertools.permutations(axes))


def _made(op, args, env, **attrs):
    """The node and env, or nothing when the op refuses these operands."""
    try:
        node = make_node(op, args, **attrs)
    except NgrulesError:
        return
    yield node, env


def structures(rule: Rule, length: int = LENGTH) -> list[tuple[Node, frozenset, dict]]:
    """Every graph of the rule's pattern with one group per role at most at the root and
    under each reduction and Dot (`roles`), one axis each, every node in every order its op
    allows, up to the groups' names: (root, the constants that stand for any value, the
    pattern's names bound to nodes).
    NotUniform when there are more than MAX_STRUCTURES."""
    from ngrules.verification.instances.hints import guard_hints

    shapes, seen, built = _Shapes(length, guard_hints(rule)), {}, 0
    for k in range(roles(rule.roots[0]) + 1):
        root_axes = tuple(shapes.group() for _ in range(k))
        for node, env in shapes.build(rule.roots[0], root_axes, {}):
            built += 1
            seen.setdefault(_canonical(node), (node, frozenset(shapes.anyvalue), env))
            if len(seen) > MAX_STRUCTURES or built > 100 * MAX_STRUCTURES:
                raise NotUniform(f"more than {MAX_STRUCTURES} structures of groups")
    return list(seen.values())


def _canonical(node: Node) -> str:
    """The graph's text with groups and inputs named by first appearance."""
    from ngrules.ir.graph import format_graph

    text, names = format_graph([node]), {}
    return re.sub(r"\b(?:g|[a-z_]+)\d+\b|0\.5\d*|\d+\.5\b",
                  lambda m: names.setdefault(m.group(0), f"#{len(names)}"), text)


def instances(rule: Rule, length: int = LENGTH) -> list[tuple[Instance, frozenset]]:
    """The structures the rule fires on, rewritten by it (with the nodes its assumptions
    name)."""
    out = []
    for root, anyvalue, env in structures(rule, length):
        inst = rewrite_instance(rule, [root], {})
        if any(a.name not in env for a in rule.assumptions):
            raise NotUniform("an assumption on a name the pattern does not bind")
        inst.assumed = tuple((a, env[a.name]) for a in rule.assumptions)
        if inst.fired:
            out.append((inst, anyvalue))
    return out


def split_layouts(root: Node, group: str) -> Iterator[Node]:
    """The graph with one group as two axes, in each relative order at every node that sets
    an order (a leaf, a Broadcast, a ReorderAxes): axis orders are pairwise, so two axes of
    one group and one of each other group meet every order a bigger group can have."""
    from ngrules.ir.graph import toposort

    nodes = toposort([root])
    ordered = [n for n in nodes if group in n.axes.names and (n.op in ORDERED or not n.args)]
    if len(ordered) > 8:
        raise NotUniform("more than 8 nodes set the order of one group's axes")
    pair = (make_axis(LENGTH, f"{group}a"), make_axis(LENGTH, f"{group}b"))
    for bits in itertools.product((0, 1), repeat=len(ordered)):
        flip = dict(zip(ordered, bits))
        try:
            yield _rebuilt(nodes, group, pair, flip)
        except NgrulesError:
            continue  # operands in different orders: no such graph


#: Ops whose attributes set their result's axis order.
ORDERED = frozenset({"Broadcast", "ReorderAxes"})


def _rebuilt(nodes: list[Node], group: str, pair: tuple, flip: dict) -> Node:
    def spread(axes, reverse=False):
        two = pair[::-1] if reverse else pair
        return Axes([b for a in axes for b in (two if a.name == group else (a,))])

    new: dict[Node, Node] = {}
    for n in nodes:
        args = tuple(new[a] for a in n.args)
        if n.op == "Placeholder":
            new[n] = placeholder(spread(n.axes, flip.get(n, 0)), dtype=n.dtype, name=n.name)
        elif n.op == "Constant":
            axes = spread(n.axes, flip.get(n, 0))
            new[n] = constant(np.full(axes.lengths, np.asarray(n.attrs["value"]).flat[0]),
                              axes, dtype=n.dtype)
        elif n.op in ORDERED:
            new[n] = make_node(n.op, args, axes=spread(n.attrs["axes"], flip.get(n, 0)))
        elif n.op in ("Sum", "Max", "Min"):
            new[n] = make_node(n.op, args, reduction_axes=spread(n.attrs["reduction_axes"]))
        elif n.op == "Reverse":
            new[n] = make_node(n.op, args, reverse_axes=spread(n.attrs["reverse_axes"]))
        else:
            new[n] = make_node(n.op, args, **dict(n.attrs))
    return new[nodes[-1]]


def well_formed_split(rule: Rule, found: list) -> str | None:
    """None when the rule's rewrite is well-formed wherever it fires with a group split in
    two axes (every structure it fires on, every group, every relative order), else why."""
    for inst, _ in found:
        groups = {a.name for n in _nodes(inst) for a in n.axes if re.fullmatch(r"g\d+", a.name)}
        for group in sorted(groups):
            for root in split_layouts(inst.outputs[0], group):
                got = rewrite_instance(rule, [root], {})
                if got.fired and got.error is not None:
                    return f"ill-formed with a group of two axes: {got.error}"
    return None


def _new_constants(inst: Instance) -> list[float]:
    from ngrules.ir.graph import toposort

    before = set(toposort(inst.outputs))
    return sorted(float(np.asarray(n.attrs["value"]).flat[0]) for n in toposort(_after(inst) or [])
                  if n.op == "Constant" and n not in before and np.asarray(n.attrs["value"]).size)


def length_free(rule: Rule, found: list) -> bool:
    """The rule fires on the same structures, with the same new constants, at another group
    length: its replacement does not depend on the lengths."""
    other = instances(rule, OTHER_LENGTH)
    return len(other) == len(found) and all(
        _new_constants(a) == _new_constants(b) for (a, _), (b, _) in zip(found, other))


def prove_generic(inst: Instance, anyvalue: frozenset, semantics: str) -> str | None:
    """None when before == after at a generic element for every group length (z3: unsat),
    else why not."""
    from ngrules.verification.prove.ground import ground_axioms

    if inst.error is not None:
        return f"the rewrite failed: {inst.error}"
    groups = {a.name for n in _nodes(inst) for a in n.axes if re.fullmatch(r"g\d+", a.name)}
    generic = Generic({g: z3.Real(f"n.{g}") for g in groups})
    try:
        before = element(inst.outputs, generic, anyvalue)[0]
        after = element(_after(inst), generic, anyvalue)[0]
    except (Unsupported, NotImplementedError) as e:
        return f"no generic element: {e}"
    same = z3.Implies(before.ok, z3.And(after.ok, before.v == after.v))
    claim = same if semantics == "refine" else z3.And(same, after.ok == before.ok)
    try:  # an assumption holds at the generic element (a weaker premise than everywhere)
        assumed = [_within(a, element([n], generic, anyvalue)[0]) for a, n in inst.assumed]
    except (Unsupported, NotImplementedError) as e:
        return f"no generic element: {e}"
    solver = z3.Solver()
    solver.set("rlimit", 4_000_000)
    solver.add(*ground_axioms(claim), *[z3.Real(f"n.{g}") >= 1 for g in groups], *assumed)
    solver.add(z3.Not(claim))
    answer = solver.check()
    return None if answer == z3.unsat else f"z3 did not prove it at a generic element ({answer})"


def _within(a, sym):
    """The assumption `a` on one element: defined, and within its range."""
    parts = [z3.BoolVal(True) if sym.ok is True else sym.ok]
    if a.low > -np.inf:
        parts.append(sym.v > a.low if a.low_open else sym.v >= a.low)
    if a.high < np.inf:
        parts.append(sym.v < a.high if a.high_open else sym.v <= a.high)
    return z3.And(*parts)


def _after(inst: Instance) -> list[Node]:
    return inst.after if inst.stop == "fixpoint" else inst.step


def _nodes(inst: Instance) -> list[Node]:
    from ngrules.ir.graph import toposort

    return toposort(inst.outputs + (_after(inst) or []))


def every_shape(rule: Rule, semantics: str = "strict") -> tuple[list[Instance], str]:
    """(the structures, "") when the rule is proved for every shape, else ([], why not)."""
    try:
        check_uniform(rule)
        found = instances(rule)
    except NotUniform as e:
        return [], str(e)
    if not found:
        return [], "it fires on none of the structures of groups"
    for inst, anyvalue in found:
        why = prove_generic(inst, anyvalue, semantics)
        if why is not None:
            return [], why
    if not length_free(rule, found):
        return [], "its replacement depends on the lengths"
    why = well_formed_split(rule, found)
    if why is not None:
        return [], why
    return [inst for inst, _ in found], ""
