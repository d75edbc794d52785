"""Proofs for every shape: axes grouped by role, one axis standing for each group (issue 35).

After TensorRight (POPL 2025): the axes of a rule's tensors fall into groups by the role they
play (reduced by this `Sum`, contracted by this `Dot`, kept, broadcast away, on x's side of a
`Dot` or y's). When every op of both sides treats an axis by its name only (elementwise ops,
`Broadcast`, `ReorderAxes`, `Sum`, `Max`, `Min`, `Dot`) and the rule's text reads axes only as
wholes (no indexing, slicing, sizes, flattening, positions), a group of k axes behaves as one
axis whose length is their product: so a proof with one axis per group, of any length, is a
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
from ngrules.ir.axes import Axes, make_axis
from ngrules.ir.frontend import constant, placeholder
from ngrules.ir.graph import Node, make_node
from ngrules.ir.ops import OPS
from ngrules.lang.rules import Rule
from ngrules.lang.syntax import PLit, PNamed, POp, PVar
from ngrules.verification.instances.sampling import Instance, rewrite_instance
from ngrules.verification.prove.scalars import ENCODINGS
from ngrules.verification.prove.symbolic import Generic, Unsupported, element

#: Groups at the root and under each reduction (each in every role); structures kept at most.
MAX_GROUPS, MAX_STRUCTURES = 3, 600
#: Rule text that reads axes by position or size: the reduction to one axis per group fails.
POSITIONAL = re.compile(r"\[|\bsize\(|\.length|\.shape|\.lengths|flatten|Transpose|transpose"
                        r"|value\(|new_axis|Slice|\bpad\(|Flatten|DotLowDimension|Pad\b")
UNIFORM = frozenset({"Broadcast", "ReorderAxes", "Sum", "Max", "Min", "Dot"})
#: Group lengths the structures are built at (a replacement that depends on them is refused).
LENGTH, OTHER_LENGTH = 2, 3


class NotUniform(Exception):
    """The rule is outside the fragment where one axis per group stands for every shape."""


def check_uniform(rule: Rule) -> None:
    """Raise NotUniform saying why the rule is outside the fragment."""
    if len(rule.roots) != 1 or rule.assumptions:
        raise NotUniform("several roots or an assumption")
    found = POSITIONAL.search(rule.source or "")
    if found:
        raise NotUniform(f"the rule reads axes by position or size (`{found.group(0)}`)")
    for p in _walk(rule.roots[0]):
        if isinstance(p, POp) and p.op not in UNIFORM and not _elementwise(p.op):
            raise NotUniform(f"{p.op} does not treat axes by name only")
        if isinstance(p, PVar) and p.kind not in (None, "scalar", "Constant", "constant"):
            raise NotUniform(f"a variable of kind {p.kind}")


def _elementwise(op: str) -> bool:
    return op in ENCODINGS and OPS[op].has("elementwise")


def _walk(p):
    yield p
    for child in getattr(p, "args", ()) or ((p.pattern,) if isinstance(p, PNamed) else ()):
        yield from _walk(child)


class _Shapes:
    """Graphs of the pattern with one axis per group, every role and order enumerated."""

    def __init__(self, length: int):
        self.length, self.count = length, 0
        self.anyvalue: set[Node] = set()

    def group(self) -> object:
        self.count += 1
        return make_axis(self.length, f"g{self.count}")

    def build(self, p, axes: tuple, env: dict) -> Iterator[tuple[Node, dict]]:
        if isinstance(p, PNamed):
            yield from self._named(p, axes, env)
        elif isinstance(p, PVar):
            yield from self._var(p, axes, env)
        elif isinstance(p, PLit):
            c = constant(p.value, dtype=np.float64)
            yield (make_node("Broadcast", (c,), axes=Axes(axes)) if axes else c), env
        elif p.optional:
            yield from self.build(p.args[0], axes, env)
            yield from self._op(p, axes, env)
        else:
            yield from self._op(p, axes, env)

    def _named(self, p, axes, env):
        if p.name in env:
            if tuple(env[p.name].axes) == axes:
                yield env[p.name], env
            return
        for node, env2 in self.build(p.pattern, axes, env):
            yield node, {**env2, p.name: node}

    def _var(self, p, axes, env):
        if p.name in env and p.name != "_":
            if tuple(env[p.name].axes) == axes:
                yield env[p.name], env
            return
        if p.kind == "scalar" and axes:
            return
        for order in _orders(axes):
            if p.kind in ("Constant", "constant"):
                self.count += 1  # a value of its own: never the same node as another's
                node = constant(np.full([a.length for a in order], 0.5 + self.count),
                                order, dtype=np.float64)
                self.anyvalue.add(node)
            else:
                self.count += 1
                node = placeholder(order, dtype=np.float64, name=f"{p.name}{self.count}")
            got = node if order == axes else make_node("ReorderAxes", (node,), axes=Axes(axes))
            yield got, {**env, p.name: got} if p.name != "_" else env

    def _op(self, p, axes, env):
        if p.op == "Broadcast":
            for keep in itertools.product((True, False), repeat=len(axes)):
                inner = tuple(a for a, k in zip(axes, keep) if k)
                for arg, env2 in self.build(p.args[0], inner, env):
                    yield from _made("Broadcast", (arg,), env2, axes=Axes(axes))
        elif p.op in ("Sum", "Max", "Min"):
            for k in range(MAX_GROUPS):
                reduced = tuple(self.group() for _ in range(k))
                for arg, env2 in self.build(p.args[0], axes + reduced, env):
                    yield from _made(p.op, (arg,), env2, reduction_axes=Axes(reduced))
        elif p.op == "Dot":
            yield from self._dot(p, axes, env)
        elif p.op == "ReorderAxes":
            for order in _orders(axes):
                for arg, env2 in self.build(p.args[0], order, env):
                    yield from _made("ReorderAxes", (arg,), env2, axes=Axes(axes))
        else:  # elementwise: every operand on the node's axes
            yield from self._operands(p, list(p.args), axes, env, [])

    def _operands(self, p, rest, axes, env, done):
        if not rest:
            yield from _made(p.op, tuple(done), env)
            return
        for arg, env2 in self.build(rest[0], axes, env):
            yield from self._operands(p, rest[1:], axes, env2, [*done, arg])

    def _dot(self, p, axes, env):
        for side in itertools.product((0, 1), repeat=len(axes)):
            xo = tuple(a for a, s in zip(axes, side) if s == 0)
            yo = tuple(a for a, s in zip(axes, side) if s == 1)
            if xo + yo != axes:
                continue  # Dot's axes are x's then y's
            for k in range(MAX_GROUPS):
                shared = tuple(self.group() for _ in range(k))
                for x, env2 in self.build(p.args[0], xo + shared, env):
                    for y, env3 in self.build(p.args[1], shared + yo, env2):
                        yield from _made("Dot", (x, y), env3)


def _orders(axes: tuple) -> list[tuple]:
    return list(itertools.permutations(axes)) if len(axes) <= 3 else [axes]


def _made(op, args, env, **attrs):
    """The node and env, or nothing when the op refuses these operands."""
    try:
        node = make_node(op, args, **attrs)
    except NgrulesError:
        return
    yield node, env


def structures(rule: Rule, length: int = LENGTH) -> list[tuple[Node, frozenset]]:
    """Every graph of the rule's pattern with at most MAX_GROUPS groups at the root and under
    each reduction, one axis each, in every order, up to the groups' names: (root, the
    constants that stand for any value). NotUniform when there are more than MAX_STRUCTURES."""
    shapes, seen, built = _Shapes(length), {}, 0
    for k in range(MAX_GROUPS + 1):
        root_axes = tuple(shapes.group() for _ in range(k))
        for order in _orders(root_axes):
            for node, _env in shapes.build(rule.roots[0], order, {}):
                built += 1
                seen.setdefault(_canonical(node), (node, frozenset(shapes.anyvalue)))
                if len(seen) > MAX_STRUCTURES or built > 50 * MAX_STRUCTURES:
                    raise NotUniform(f"more than {MAX_STRUCTURES} structures of groups")
    return list(seen.values())


def _canonical(node: Node) -> str:
    """The graph's text with groups and inputs named by first appearance."""
    from ngrules.ir.graph import format_graph

    text, names = format_graph([node]), {}
    return re.sub(r"\b(?:g|[a-z_]+)\d+\b|0\.5\d*|\d+\.5\b",
                  lambda m: names.setdefault(m.group(0), f"#{len(names)}"), text)


def instances(rule: Rule, length: int = LENGTH) -> list[tuple[Instance, frozenset]]:
    """The structures the rule fires on, rewritten by it."""
    out = []
    for root, anyvalue in structures(rule, length):
        inst = rewrite_instance(rule, [root], {})
        if inst.fired:
            out.append((inst, anyvalue))
    return out


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
    solver = z3.Solver()
    solver.set("rlimit", 4_000_000)
    solver.add(*ground_axioms(claim), *[z3.Real(f"n.{g}") >= 1 for g in groups])
    solver.add(z3.Not(claim))
    answer = solver.check()
    return None if answer == z3.unsat else f"z3 did not prove it at a generic element ({answer})"


def _after(inst: Instance) -> list[Node]:
    return inst.after if inst.stop == "fixpoint" else inst.step


def _nodes(inst: Instance) -> list[Node]:
    from ngrules.ir.graph import toposort

    return toposort(inst.outputs + (_after(inst) or []))


def every_shape(rule: Rule, semantics: str = "strict") -> tuple[int, str]:
    """(the structures proved, "") when the rule is proved for every shape, else (0, why not)."""
    try:
        check_uniform(rule)
        found = instances(rule)
    except NotUniform as e:
        return 0, str(e)
    if not found:
        return 0, "it fires on none of the structures of groups"
    for inst, anyvalue in found:
        why = prove_generic(inst, anyvalue, semantics)
        if why is not None:
            return 0, why
    if not length_free(rule, found):
        return 0, "its replacement depends on the lengths"
    return len(found), ""
