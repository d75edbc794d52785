"""Patterns compiled to straight-line Python, as fast as a hand-written matcher.

A pattern becomes one generated function `match(node, b, k)` with the reference matcher's
semantics and enumeration order: nested `if`s test ops, literals and kinds; nested `for` loops
try the alternatives (a commutative op's two argument orders, an optional wrapper present or
absent), so backtracking is just the next loop iteration; bound variables live in locals and
reach `k` as a dict only when the whole pattern matched.

The pattern is walked in its own order whatever the alternatives do, so the first use of each
name is known when generating. Nothing from rule text is pasted into the source: op names,
variable names, literals and kind tests enter as entries of the function's constant table;
only generated identifiers appear in the code. `source_of(matcher)` returns the code.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ngrules.engine.semantics import is_commutative, kind_predicate, literal_is, rounded
from ngrules.ir.ops import OPS
from ngrules.lang.syntax import PLit, PNamed, POp, PVar

Emit = Callable[[int], None]


def _optional(node, op):
    """The ways an optional wrapper can be read: under `op` first, then without it."""
    if node.op == op and len(node.args) == 1:
        return (node.args[0], node)
    return (node,)


class _Generator:
    """Emits the body of one matcher; `consts` becomes the generated function's globals."""

    def __init__(self, prebound: dict[str, str]):
        self.lines: list[str] = []
        self.consts: dict[str, object] = {"_optional": _optional, "_lit": literal_is}
        self.bound = dict(prebound)  # pattern name -> local holding its node, on this path
        self.count = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def const(self, value) -> str:
        name = self.fresh("C")
        self.consts[name] = value
        return name

    def line(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    # -- one element: test `node` against `p`, then emit `rest` inside -----------------------
    def emit(self, p, node: str, indent: int, rest: Emit) -> None:
        if isinstance(p, PVar):
            self._var(p, node, indent, rest)
        elif isinstance(p, PLit):
            f32, f64 = self.const(rounded(p.value, np.float32)), self.const(float(p.value))
            self.line(indent, f"if _lit({node}, {f32}, {f64}):")
            rest(indent + 1)
        elif isinstance(p, PNamed):
            if p.name in self.bound:
                self._bind(p.name, node, indent, rest)
            else:
                self.emit(p.pattern, node, indent, lambda i: self._bind(p.name, node, i, rest))
        elif p.optional:
            inner = self.fresh("o")
            self.line(indent, f"for {inner} in _optional({node}, {self.const(p.op)}):")
            self.emit(p.args[0], inner, indent + 1, rest)
        else:
            self._op(p, node, indent, rest)

    def _bind(self, name: str, node: str, indent: int, rest: Emit) -> None:
        """A later use must be the same node; the first use binds it for what follows."""
        local = self.bound.get(name)
        if local is not None:
            self.line(indent, f"if {node} is {local}:")
            rest(indent + 1)
            return
        self.bound[name] = node
        rest(indent)
        del self.bound[name]

    def _var(self, p: PVar, node: str, indent: int, rest: Emit) -> None:
        if p.kind is not None:
            self.line(indent, f"if {self.const(kind_predicate(p.kind))}({node}):")
            indent += 1
        if p.name == "_":
            rest(indent)
        else:
            self._bind(p.name, node, indent, rest)

    def _op(self, p: POp, node: str, indent: int, rest: Emit) -> None:
        arity, op = len(p.args), self.const(p.op)
        fixed = OPS[p.op].arity is not None if p.op in OPS else False
        check = "" if fixed else f" and len({node}.args) == {arity}"
        self.line(indent, f"if {node}.op == {op}{check}:")
        indent += 1
        args = [self.fresh("a") for _ in p.args]
        if arity == 2 and is_commutative(p.op):
            x, y = args
            self.line(
                indent,
                f"for {x}, {y} in (({node}.args[0], {node}.args[1]), "
                f"({node}.args[1], {node}.args[0])):",
            )
            indent += 1
        elif arity:
            self.line(indent, f"{', '.join(args)}, = {node}.args")
        self._sequence(list(zip(p.args, args)), indent, rest)

    def _sequence(self, pairs, indent: int, rest: Emit) -> None:
        if not pairs:
            rest(indent)
            return
        (p, node), tail = pairs[0], pairs[1:]
        self.emit(p, node, indent, lambda i: self._sequence(tail, i, rest))

    def finish(self, indent: int) -> None:
        """Innermost point: every element matched; hand the bindings to the continuation."""
        items = ", ".join(f"{self.const(name)}: {local}" for name, local in self.bound.items())
        self.line(indent, f"r = k({{**b, {items}}})" if items else "r = k(b)")
        self.line(indent, "if r is not None:")
        self.line(indent + 1, "return r")


def generate(pattern, prebound: frozenset[str] = frozenset()) -> tuple[str, dict]:
    """The source of `match(node, b, k)` for pattern, and its constant table.

    `prebound` names are read from `b` (bound by an earlier root); every other name in the
    pattern is bound here.
    """
    names = {n: f"pre{i}" for i, n in enumerate(sorted(prebound & names_in(pattern)))}
    gen = _Generator(names)
    head = ["def match(node, b, k):"]
    head += [f"    {local} = b[{gen.const(name)}]" for name, local in names.items()]
    gen.emit(pattern, "node", 1, gen.finish)
    return "\n".join(head + gen.lines + ["    return None"]) + "\n", gen.consts


def names_in(pattern) -> set[str]:
    """Every name the pattern binds."""
    if isinstance(pattern, PVar):
        return set() if pattern.name == "_" else {pattern.name}
    if isinstance(pattern, PNamed):
        return {pattern.name} | names_in(pattern.pattern)
    if isinstance(pattern, POp):
        return set().union(*(names_in(a) for a in pattern.args))
    return set()


def compile_generated(pattern, prebound: frozenset[str] = frozenset()):
    """A matcher function generated from the pattern (see the module docstring)."""
    source, consts = generate(pattern, prebound)
    namespace = dict(consts)
    exec(compile(source, "<ngrules pattern>", "exec"), namespace)  # noqa: S102 - generated
    match = namespace["match"]
    match.source = source
    return match


def source_of(matcher) -> str:
    return getattr(matcher, "source", "")
