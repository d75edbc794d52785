"""Patterns compiled to straight-line Python, as fast as a hand-written matcher.

A pattern becomes one generated function `match(node, b, k)` with the reference matcher's
semantics and enumeration order: nested `if`s test ops, literals and kinds; nested `for` loops
try the alternatives (a commutative op's two argument orders, an optional wrapper present or
absent), so backtracking is just the next loop iteration; bound variables live in locals and
reach `k` as a dict only when the whole pattern matched.

The pattern is walked in its own order whatever the alternatives do, so the first use of each
name is known when generating. The chain is generated from a work list, not by recursion, and
a chain nested deeper than Python allows (100 levels, 20 loops) continues in a further
function that the first calls with the locals it needs, so every pattern the checker accepts
compiles. Nothing from rule text is pasted into the source: op names,
variable names, literals and kind tests enter as entries of the function's constant table;
only generated identifiers appear in the code. `source_of(matcher)` returns the code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ngrules.engine.pending import NONE_PENDING, same_node
from ngrules.engine.semantics import (
    F16,
    F32,
    MAX_ORDERS,
    VALUELESS,
    kind_predicate,
    literal_is,
    rounded,
    same_type,
    swaps,
    too_many_orders,
)
from ngrules.ir.graph import UNKNOWN
from ngrules.ir.ops import OPS
from ngrules.lang import code_cache
from ngrules.lang.syntax import PLit, PNamed, POp, PVar, walk

#: A generated function nests at most this deep (Python allows 100 levels of indentation and
#: 20 nested loops); the rest of the pattern continues in a further function it calls.
MAX_INDENT, MAX_LOOPS = 40, 10


class _Function:
    """One generated function: its lines so far, and how deeply the next line nests."""

    def __init__(self, header: str):
        self.lines = [header]
        self.indent, self.loops = 1, 0

    def line(self, text: str, opens: bool = False, loop: bool = False) -> None:
        self.lines.append("    " * self.indent + text)
        self.indent += opens or loop
        self.loops += loop


class _Generator:
    """Emits a pattern's matcher as one chain of nested tests and loops, element by element in
    the pattern's own order (an explicit work list: no recursion on the pattern's size). The
    chain is cut into several functions when it nests too deep. `consts` becomes the
    functions' globals."""

    def __init__(
        self,
        prebound: dict[str, str],
        returns: str | None = None,
        fused: bool = False,
        inline: Inline | None = None,
    ):
        self.consts: dict[str, object] = {
            "_lit": literal_is,
            "_UNKNOWN": UNKNOWN,
            "_VALUELESS": VALUELESS,
            "_F32": F32,
            "_F16": F16,
            "_same": same_node,
            "_NONE": NONE_PENDING,
            "_same_type": same_type,
            "_WRONG_TYPE": WRONG_TYPE,
        }
        self.returns, self.fused, self.inline = returns, fused, inline
        self.bound = dict(prebound)  # pattern name -> local holding its node
        self.count = 0
        self.done: list[_Function] = []
        self.fn = _Function("def match(node, b, k, V=_NONE):")
        self.work: list[tuple] = []  # ("match", pattern, local) / ("bind", name, local), top last

    def fresh(self, stem: str) -> str:
        self.count += 1
        prefix = self.inline.prefix if self.inline is not None else ""
        return f"{prefix}{stem}{self.count}"

    def view_of(self, node: str) -> str:
        """The expression of a node's arguments as the walk sees them (a pending node's view);
        the root's may be a local of an inlined matcher (see `Inline`)."""
        if node == "node" and self.inline is not None and self.inline.view is not None:
            return self.inline.view
        return f"(V.get({node}) or {node}.args)"

    def const(self, value) -> str:
        name = self.fresh("C")
        self.consts[name] = value
        return name

    def run(self, pattern, node: str) -> str:
        self.tries = None  # the counter of commutative orders tried, if it can pass the bound
        if _choices(pattern) > COUNTED:
            self.tries = self.const([0])
            self.too_many = self.const(lambda n, span=pattern.span: too_many_orders(span, n))
            self.fn.line(f"{self.tries}[0] = 0")
        self.work.append(("match", pattern, node))
        while self.work:
            if self.fn.indent >= MAX_INDENT or self.fn.loops >= MAX_LOOPS:
                self._split()
            item = self.work.pop()
            if item[0] == "bind":
                self._bind(item[1], item[2])
            else:
                self._emit(item[1], item[2])
        self._finish()
        return "\n".join(line for f in [*self.done, self.fn] for line in f.lines) + "\n"

    def _close(self) -> None:
        self.fn.lines.append("    return None")
        self.done.append(self.fn)

    def _split(self) -> None:
        """The rest of the chain becomes a new function, called with the locals it reads (and
        the root `node`, which a matcher of `=> x` compares its result with at the end)."""
        live = sorted({item[2] for item in self.work} | set(self.bound.values()) | {"node"})
        name = self.fresh("_part")
        params = ", ".join([*live, "b", "k", "V"])
        self.fn.line(f"r = {name}({params})")
        self.fn.line("if r is not None:", opens=True)
        self.fn.line("return r")
        self._close()
        self.fn = _Function(f"def {name}({params}):")

    # -- one element: a test, a loop over alternatives, or a binding --------------------------
    def _emit(self, p, node: str) -> None:
        if isinstance(p, PVar):
            if p.kind in OPS:  # an op's name: its test in line (what kind_predicate does)
                self.fn.line(f"if {node}.op == {self.const(p.kind)}:", opens=True)
            elif p.kind is not None:
                self.fn.line(f"if {self.const(kind_predicate(p.kind))}({node}):", opens=True)
            if p.name != "_":
                self._bind(p.name, node)
        elif isinstance(p, PLit):
            f32, f64 = self.const(rounded(p.value, np.float32)), self.const(float(p.value))
            f16 = self.const(rounded(p.value, np.float16))
            real, known = self.fresh("l"), self.fresh("k")  # its value, not its view's
            # a pending node of an op that never holds a value is not built to be rejected
            self.fn.line(f"{real} = V.force({node}) if {node} in V and {node}.op not in "
                         f"_VALUELESS else {node}")
            self.fn.line(f"{known} = {real}._scalar")
            # literal_is in line for a value already known (cached on the node); else called
            cached = (f"{known} is not _UNKNOWN and {known} is not None and "
                      f"{known} == ({f32} if {real}.dtype is _F32 else "
                      f"{f16} if {real}.dtype is _F16 else {f64})")
            unknown = f"{known} is _UNKNOWN and {real}.op not in _VALUELESS"
            self.fn.line(f"if ({cached}) or ({unknown} and _lit({real}, {f32}, {f64}, {f16})):",
                         opens=True)
        elif isinstance(p, PNamed):
            if p.name in self.bound:
                self._bind(p.name, node)
            else:
                self.work += [("bind", p.name, node), ("match", p.pattern, node)]
        elif p.optional:
            inner = self.fresh("o")
            # under `op` first (its operand, through its view), then node without it
            under = self.fresh("w")
            self.fn.line(f"{under} = {self.view_of(node)} if {node}.op == {self.const(p.op)} "
                         "else ()")
            self.fn.line(f"for {inner} in (({under}[0], {node}) if len({under}) == 1 "
                         f"else ({node},)):", loop=True)
            self.work.append(("match", p.args[0], inner))
        else:
            self._op(p, node)

    def _bind(self, name: str, node: str) -> None:
        """A later use must be the same node; the first use binds it for what follows."""
        local = self.bound.get(name)
        if local is not None:
            self.fn.line(f"if {node} is {local} or _same({node}, {local}, V):", opens=True)
        else:
            self.bound[name] = node

    def _op(self, p: POp, node: str) -> None:
        arity, op = len(p.args), self.const(p.op)
        fixed = OPS[p.op].arity is not None if p.op in OPS else False
        self.fn.line(f"if {node}.op == {op}:", opens=True)
        if not arity and fixed:
            return
        view = self.fresh("v")  # its arguments' normal forms, rebuilt or pending (see pending)
        self.fn.line(f"{view} = {self.view_of(node)}")
        if not fixed:
            self.fn.line(f"if len({view}) == {arity}:", opens=True)
        args = [self.fresh("a") for _ in p.args]
        if arity == 2 and swaps(p):
            x, y = args
            self.fn.line(f"for {x}, {y} in (({view}[0], {view}[1]), ({view}[1], {view}[0])):",
                         loop=True)
            if self.tries is not None:
                self.fn.line(f"{self.tries}[0] += 1")
                self.fn.line(f"if {self.tries}[0] > {MAX_ORDERS}:", opens=True)
                self.fn.line(f"{self.too_many}({node})")
                self.fn.indent -= 1
            second = p.args[1]  # its op decides before the first operand's alternatives
            if isinstance(second, POp) and not second.optional and _choices(p.args[0]):
                self.fn.line(f"if {y}.op == {self.const(second.op)}:", opens=True)
        elif arity:
            self.fn.line(f"{', '.join(args)}, = {view}")
        self.work += [("match", a, local) for a, local in reversed(list(zip(p.args, args)))]

    def _finish(self) -> None:
        """Innermost point: every element matched; hand the bindings to the continuation (or,
        for a matcher of `=> x`, return x when it can stand in for the node)."""
        if self.inline is not None:
            self._finish_inline()
            return
        if self.returns is not None:
            value = self.bound[self.returns]
            self.fn.line(f"if _same_type({value}, node):", opens=True)
            self.fn.line(f"return {value}")
            self.fn.indent -= 1
            self.fn.line("return _WRONG_TYPE")
            self._close()
            return
        if self.fused:  # the clauses' function takes the bound nodes (see `fused`)
            self.fn.line(f"r = _CL(node, V, {', '.join(self.bound.values())})")
            self.fn.line("if r is not None:", opens=True)
            self.fn.line("return r")
            self._close()
            return
        items = ", ".join(f"{self.const(name)}: {local}" for name, local in self.bound.items())
        self.fn.line(f"r = k({{**b, {items}}})" if items else "r = k(b)")
        self.fn.line("if r is not None:", opens=True)
        self.fn.line("return r")
        self._close()


    def _finish_inline(self) -> None:
        """The innermost point of an inlined matcher: the caller's lines, then no `return`
        (a chain that does not match falls through to what follows it)."""
        inline, indent = self.inline, "    " * self.fn.indent
        if self.returns is not None:
            value = self.bound[self.returns]
            self.fn.line(f"if _same_type({value}, node):", opens=True)
            self.fn.lines += [indent + "    " + x for x in inline.on_value(value)]
            self.fn.lines += [indent + x for x in inline.on_wrong()]
        else:  # fused: the caller's clauses, reading the bound nodes, set `r`
            self.fn.lines += [indent + x for x in inline.clauses(dict(self.bound))]
            self.fn.line("if r is not None:", opens=True)
            self.fn.lines += [indent + "    " + x for x in inline.on_found("r")]
        self._close()


#: A pattern with at most this many choice points (commutative ops that swap, optional
#: wrappers) tries fewer than 2 ** (COUNTED + 1) orders at one node, below `MAX_ORDERS`: its
#: matcher needs no counter (the hot rules, `x * 1`, have one choice point).
COUNTED = 15
assert 2 ** (COUNTED + 1) < MAX_ORDERS


def _choices(pattern) -> int:
    """How many elements of the pattern try alternatives."""
    return sum(isinstance(p, POp) and (p.optional or swaps(p)) for p in walk([pattern]))


#: What a matcher of `=> x` returns when x has another type than the node (a wrong rule).
WRONG_TYPE = object()


@dataclass
class Inline:
    """How a matcher is pasted into a generated dispatch (see `dispatch`): its locals and
    constants are prefixed with `prefix`; the root's arguments are read from the local `view`
    if given; at a match, the lines `on_value(local)` (a `=> x` rule: x is in the local) or
    `on_found(local)` (a rule whose clauses, the lines `clauses(bound)` reading the nodes
    from the locals `bound` names, set the local to (roots, replacements, new nodes) or None)
    end the dispatch; `on_wrong()` when x cannot stand in for the root."""

    prefix: str
    view: str | None
    on_value: Callable[[str], list[str]]
    on_found: Callable[[str], list[str]]
    on_wrong: Callable[[], list[str]]
    clauses: Callable[[dict[str, str]], list[str]] | None = None


def inline_matcher(pattern, inline: Inline, returns: str | None) -> tuple[list[str], dict] | None:
    """The lines of a one-root rule's matcher to paste at indent 1 of a function whose
    parameters include `node` and `V`, and its constants; None when the chain had to be cut
    into several functions (the caller then calls the matcher). A `=> x` rule passes
    `returns`; any other is fused (`compile_fused`'s matcher, its clauses pasted by
    `inline.clauses`)."""
    gen = _Generator({}, returns, fused=returns is None, inline=inline)
    gen.run(pattern, "node")
    if gen.done[:-1]:  # split: more than one function
        return None
    return gen.done[-1].lines[1:-1], gen.consts  # no header, no final `return None`


def generate(
    pattern, prebound: frozenset[str] = frozenset(), returns: str | None = None
) -> tuple[str, dict]:
    """The source of `match(node, b, k)` for pattern, and its constant table.

    `prebound` names are read from `b` (bound by an earlier root); every other name in the
    pattern is bound here. With `returns`, the first match returns that name's node instead of
    calling `k` (see `compile_returning`).
    """
    names = {n: f"pre{i}" for i, n in enumerate(sorted(prebound & names_in(pattern)))}
    gen = _Generator(names, returns)
    for name, local in names.items():
        gen.fn.line(f"{local} = b[{gen.const(name)}]")
    return gen.run(pattern, "node"), gen.consts


def compile_fused(pattern) -> tuple[Callable, list[str]]:
    """The matcher of a one-root rule, `match(node, None, None, V)`, that calls the function
    `match.__globals__["_CL"]` (to be set by the caller) with `node, V` and the nodes bound to
    the returned names, in that order, at each way it matches, and returns its first non-None
    result (see `fused`)."""
    gen = _Generator({}, fused=True)
    source = gen.run(pattern, "node")
    namespace = dict(gen.consts)
    exec(code_cache.compiled(source, "<ngrules pattern>"), namespace)  # noqa: S102 - generated
    match = namespace["match"]
    match.source = source
    return match, list(gen.bound)


def names_in(pattern) -> set[str]:
    """Every name the pattern binds."""
    if isinstance(pattern, PVar):
        return set() if pattern.name == "_" else {pattern.name}
    if isinstance(pattern, PNamed):
        return {pattern.name} | names_in(pattern.pattern)
    if isinstance(pattern, POp):
        return set().union(*(names_in(a) for a in pattern.args))
    return set()


def compile_generated(
    pattern, prebound: frozenset[str] = frozenset(), returns: str | None = None
):
    """A matcher function generated from the pattern (see the module docstring)."""
    source, consts = generate(pattern, prebound, returns)
    namespace = dict(consts)
    exec(code_cache.compiled(source, "<ngrules pattern>"), namespace)  # noqa: S102 - generated
    match = namespace["match"]
    match.source = source
    return match


def compile_returning(pattern, name: str):
    """The matcher of a one-root rule `pattern => name` with no clauses, called as
    `match(node, None, None, V)`: the node bound to name at the first match (no bindings dict,
    no continuation), WRONG_TYPE if that node cannot stand in for `node`, or None."""
    return compile_generated(pattern, frozenset(), name)


def source_of(matcher) -> str:
    return getattr(matcher, "source", "")
