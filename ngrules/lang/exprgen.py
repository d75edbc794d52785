"""A rule's lets, guards and replacement compiled to one straight-line Python function.

`compile_clauses(clauses, replacement)` returns `run(b)`: given a match's bindings it evaluates
the lets and guards in source order and returns the tuple of replacement values, or None as
soon as a guard is false. Node attributes read slots directly, library functions are called
directly, operators are Python's own (what can grow, `+ - * | &` and function results, is
checked against `ngrules.lang.bounds` as the interpreter checks it). Nothing from rule text
is pasted into the source: names, literals, functions and op names enter as entries of the
function's constant table; only generated identifiers appear in the code.

The generated function never reports errors itself: when anything in it raises (an unbound
name, a failing function, a guard that is not a boolean), the caller runs the interpreter
(`expr.evaluate`) on the same bindings, which raises the error located at the expression
responsible. Expressions are pure, so both compute the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ngrules.ir.axes import Axes, is_difference
from ngrules.ir.frontend import apply_op
from ngrules.ir.graph import UNKNOWN, Node, make_node, make_with_floats
from ngrules.ir.ops import OPS
from ngrules.ir.symbolic import STAND_INS
from ngrules.lang import code_cache
from ngrules.lang.bounds import bounded, divide, multiply
from ngrules.lang.expr import get_attribute, guard_truth, index_value
from ngrules.lang.functions import FUNCTIONS, size_of, value_of
from ngrules.lang.syntax import (
    EAttr,
    EBinary,
    EBool,
    ECall,
    EIndex,
    ENum,
    ESlice,
    EStr,
    ETuple,
    EUnary,
    EVar,
    Let,
)

#: Node attributes read straight from the node (what `expr.NODE_ATTRIBUTES` computes).
_SLOTS = {"axes": "{}.axes", "dtype": "{}.dtype", "op": "{}.op", "args": "{}.args",
          "rank": "len({}.axes._names)"}  # `shape` reads lengths: through `known` (symbolic)
_OPERATORS = {"+", "-", "*", "/", "|", "&", "==", "!=", "<", "<=", ">", ">="}
_GROWING = {"+", "-", "|", "&"}  # results checked against the language's bounds, as expr does


#: What a node's attribute is (see `_Generator.kind`): `.axes` is always an Axes.
_NODE_KINDS = {"axes": "axes", "rank": "int"}

#: Literals, which are never Axes (an equality with one needs no Axes test).
_SCALARS = (ENum, EStr, EBool)


_COMPARISONS = {"==", "!=", "<", "<=", ">", ">="}


def _is_difference_test(e: EBinary) -> bool:
    """`a == b - c` or `a != b - c` (see `_Generator._equals_difference`)."""
    return e.op in ("==", "!=") and isinstance(e.right, EBinary) and e.right.op == "-"


class _Generator:
    def __init__(self, params: dict[str, str] | None = None, prefix: str = ""):
        self.params = params  # pattern name -> the local holding its node (else read from b)
        self.prefix = prefix  # of every generated local and constant
        self.consts: dict[str, object] = {
            "_Node": Node,
            "_attr": get_attribute,
            "_index": index_value,
            "_op": apply_op,
            "_make": make_node,
            "_make_floats": make_with_floats,
            "_truth": guard_truth,
            "_bounded": bounded,
            "_multiply": multiply,
            "_Axes": Axes,
            "_is_difference": is_difference,
            "_divide": divide,
            "_NUMBER": (int, float),
            "_prod": math.prod,
            "_STAND_INS": STAND_INS,
            "_UNKNOWN": UNKNOWN,
        }
        self.lines: list[str] = []
        self.locals: dict[str, str] = {}  # rule name -> local holding its value
        self.count = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{self.prefix}{stem}{self.count}"

    def const(self, value) -> str:
        name = self.fresh("C")
        self.consts[name] = value
        return name

    def var(self, name: str) -> str:
        local = self.locals.get(name)
        if local is None and self.params is not None:
            return self.params[name]  # KeyError: not bound by the pattern (not generated)
        if local is None:  # a pattern binding: read from the match's bindings
            local = self.locals[name] = self.fresh("v")
            self.lines.insert(0, f"    {local} = b[{self.const(name)}]")
        return local

    def expr(self, e) -> str:
        kind = type(e)
        if kind in (ENum, EStr, EBool):
            return self.const(e.value)
        if kind is EVar:
            return self.var(e.name)
        if kind is EAttr:
            return self._attr(e)
        if kind is EIndex:
            return f"_index({self.expr(e.obj)}, {self.expr(e.index)})"
        if kind is ESlice:
            start = "None" if e.start is None else self.expr(e.start)
            stop = "None" if e.stop is None else self.expr(e.stop)
            return f"{self.expr(e.obj)}[{start}:{stop}]"
        if kind is ECall:
            return self._call(e)
        if kind is EBinary:
            return self._binary(e)
        if kind is EUnary:
            operand = self.expr(e.operand)
            return f"(not {operand})" if e.op == "not" else f"(-{operand})"
        if kind is ETuple:  # nested values count whole (bounds.py); numbers cannot nest
            items = "(" + "".join(f"{self.expr(i)}, " for i in e.items) + ")"
            flat = all(isinstance(i, (ENum, EBool)) for i in e.items)
            return items if flat else f"_bounded({items})"
        raise TypeError(f"cannot compile {kind.__name__}")

    def kind(self, e) -> str | None:
        """What the value of `e` is known to be when the code is generated: "node" (a pattern
        name: the matcher binds nodes), "axes" (a node's axes), "int" (a node's rank, the len
        of a node's axes, its size), else None (its type is tested when the code runs)."""
        kind = type(e)
        if kind is EVar:
            node = self.params is not None and e.name in self.params and e.name not in self.locals
            return "node" if node else None
        if kind is EAttr and self.kind(e.obj) == "node":
            return _NODE_KINDS.get(e.name)
        if kind is ECall and len(e.args) == 1 and not e.kwargs:
            fn = getattr(FUNCTIONS.get(e.func), "fn", None)
            of = self.kind(e.args[0])
            if (fn is len and of == "axes") or (fn is size_of and of == "node"):
                return "int"
        if kind is EBinary:
            return "bool" if self._gives_bool(e) else None
        return "bool" if kind is EBool or (kind is EUnary and e.op == "not") else None

    def _gives_bool(self, e: EBinary) -> bool:
        """A comparison of numbers or of nodes' axes, or `and`/`or` of two such: a bool."""
        if e.op in ("and", "or"):
            return self.kind(e.left) == "bool" == self.kind(e.right)
        if e.op not in _COMPARISONS:
            return False
        operands = (e.left, e.right.left, e.right.right) if _is_difference_test(e) else (
            e.left, e.right)
        kinds = {self.kind(x) for x in operands}
        numbers = all(isinstance(x, ENum) or self.kind(x) == "int" for x in operands)
        axes = kinds == {"axes"} and e.op in ("==", "!=")
        return (numbers and not _is_difference_test(e)) or axes

    def _attr(self, e: EAttr) -> str:
        obj = self.expr(e.obj)
        template = _SLOTS.get(e.name)
        if template is None:
            return f"_attr({obj}, {self.const(e.name)})"
        if self.kind(e.obj) == "node":  # a pattern name: its slot, no test
            return template.format(obj)
        tmp = self.fresh("t")  # a node reads its slot; anything else goes through _attr
        fast, slow = template.format(tmp), f"_attr({tmp}, {self.const(e.name)})"
        return f"({fast} if ({tmp} := {obj}).__class__ is _Node else {slow})"

    def _call(self, e: ECall) -> str:
        args = "".join(f"{self.expr(a)}, " for a in e.args)
        kwargs = ", ".join(f"{self.const(k)}: {self.expr(v)}" for k, v in e.kwargs)
        if e.func in OPS:
            if len(e.args) == 2 and not e.kwargs and OPS[e.func].has("elementwise"):
                return f"_op({self.const(e.func)}, [{args}], {{{kwargs}}})"  # broadcasting
            if e.kwargs and all(a.kind == "float" for a in OPS[e.func].attrs):  # a fused op's
                names = self.const(tuple(k for k, _ in e.kwargs))
                values = "".join(f"{self.expr(v)}, " for _, v in e.kwargs)
                return f"_make_floats({self.const(e.func)}, ({args}), {names}, ({values}))"
            return f"_make({self.const(e.func)}, ({args}), **{{{kwargs}}})"
        fdef = FUNCTIONS.get(e.func)
        if fdef is None:
            raise KeyError(e.func)  # unknown: the interpreter reports it
        if self.kind(e) == "int":  # len of a node's axes, size of a node: in line
            return self._known_int(e, fdef)
        if fdef.fn is value_of and len(e.args) == 1 and self.kind(e.args[0]) == "node":
            t, node = self.fresh("t"), self.expr(e.args[0])  # a node's value, once computed
            return (f"({t} if ({t} := {node}._scalar) is not _UNKNOWN and {t} is not None "
                    f"else {self.const(fdef.fn)}({node}))")
        if e.func == "len" and len(e.args) == 1 and not e.kwargs:  # of Axes: no Python call
            t = self.fresh("t")
            return (f"(len({t}._names) if ({t} := {self.expr(e.args[0])}).__class__ is _Axes "
                    f"else {self.const(fdef.fn)}({t}))")
        spread = f"**{{{kwargs}}}" if e.kwargs else ""
        value = f"{self.const(fdef.fn)}({args}{spread})"
        if fdef.kind == "builder" or fdef.bounded:  # a node, or a value within the bounds
            return value
        return f"_bounded({value})"

    def _known_int(self, e: ECall, fdef) -> str:
        """`len(n.axes)` or `size(n)` of a node n: the names counted, the lengths multiplied
        (what `size` does unless a symbolic length is in use: then it is called)."""
        arg = self.expr(e.args[0])
        if fdef.fn is len:
            return f"len({arg}._names)"
        return f"(_prod({arg}.axes._lengths) if not _STAND_INS else {self.const(fdef.fn)}({arg}))"

    def _binary(self, e: EBinary) -> str:
        if _is_difference_test(e):
            return self._equals_difference(e)
        left, right = self.expr(e.left), self.expr(e.right)
        kinds = self.kind(e.left), self.kind(e.right)
        if e.op in ("==", "!=") and kinds == ("axes", "axes"):
            return f"({left}._names {e.op} {right}._names)"  # two nodes' axes
        if e.op in ("==", "!=") and (
            isinstance(e.left, _SCALARS) | isinstance(e.right, _SCALARS) or "int" in kinds
        ):
            return f"({left} {e.op} {right})"  # a literal or an int is never Axes
        if e.op in ("==", "!="):  # two Axes compare their names here, with no call
            a, b = self.fresh("t"), self.fresh("t")
            fast = f"{a}._names {e.op} {b}._names"
            both = f"(({a} := {left}).__class__ is _Axes) & (({b} := {right}).__class__ is _Axes)"
            return f"({fast} if {both} else {a} {e.op} {b})"
        if e.op in ("and", "or"):  # their values as bools (`not not` unless known to be)
            left, right = (x if self.kind(y) == "bool" else f"(not not {x})"
                           for x, y in ((left, e.left), (right, e.right)))
            return f"({left} {e.op} {right})"
        if e.op == "in":
            return f"({left} in {right})"
        if e.op not in _OPERATORS:
            raise KeyError(e.op)
        if e.op == "*" and self.kind(e.right) == "int":  # `right` is evaluated in one branch
            a = self.fresh("t")
            product = f"{a} * {right}"
            return f"({product} if ({a} := {left}).__class__ is float else _multiply({a}, {right}))"
        if e.op == "*":  # refused before it is computed if too large; a float's product is not
            a, b = self.fresh("t"), self.fresh("t")
            floats = (f"(({a} := {left}).__class__ is float) & (({b} := {right}).__class__ in "
                      f"_NUMBER) | ({a}.__class__ in _NUMBER) & ({b}.__class__ is float)")
            return f"({a} * {b} if {floats} else _multiply({a}, {b}))"
        if e.op == "/":  # numbers by zero as IEEE floats
            return f"_divide({left}, {right})"
        if e.op in _GROWING:
            return f"_bounded({left} {e.op} {right})"
        return f"({left} {e.op} {right})"

    def _equals_difference(self, e: EBinary) -> str:
        """`a == b - c`: for three Axes, compared with no new Axes built (`is_difference`)."""
        exprs = (e.left, e.right.left, e.right.right)
        negate = "not " if e.op == "!=" else ""
        if all(self.kind(x) == "axes" for x in exprs):  # three nodes' axes: no tests
            return f"({negate}_is_difference({', '.join(self.expr(x) for x in exprs)}))"
        a, b, c = self.fresh("t"), self.fresh("t"), self.fresh("t")
        operands = ((a, self.expr(exprs[0])), (b, self.expr(exprs[1])), (c, self.expr(exprs[2])))
        all_axes = " & ".join(f"(({t} := {x}).__class__ is _Axes)" for t, x in operands)
        return (f"({negate}_is_difference({a}, {b}, {c}) if {all_axes} "
                f"else {a} {e.op} _bounded({b} - {c}))")


def generate(clauses: Sequence, replacement: Sequence) -> tuple[str, dict]:
    """The source of `run(b)` and its constant table."""
    gen = _Generator()
    body = _body(gen, clauses, replacement)
    return "\n".join(["def run(b):", *gen.lines, *body]) + "\n", gen.consts


def generate_body(
    clauses: Sequence,
    replacement: Sequence,
    params: dict[str, str],
    prefix: str = "",
    on_false: str = "return None",
) -> tuple[list[str], dict]:
    """The lines of `run`'s body (indented once, ending in `return (values)`) with each
    pattern name read from the local `params` gives it, and their constant table; KeyError or
    TypeError if they cannot be generated. Its own locals and constants are named with
    `prefix` (to be pasted into other code); a false guard runs `on_false`."""
    gen = _Generator(params, prefix)
    return _body(gen, clauses, replacement, on_false), gen.consts


def _body(
    gen: _Generator, clauses: Sequence, replacement: Sequence, on_false: str = "return None"
) -> list[str]:
    body: list[str] = []
    g = gen.prefix + "g"
    for clause in clauses:
        value = gen.expr(clause.expr)
        if isinstance(clause, Let):
            local = gen.fresh("l")
            body.append(f"    {local} = {value}")
            gen.locals[clause.name] = local
        elif gen.kind(clause.expr) == "bool":
            body += [f"    if not {value}:", f"        {on_false}"]
        else:
            body += [
                f"    {g} = {value}",
                f"    if {g} is not True:",
                f"        if {g} is False or not _truth({g}):",
                f"            {on_false}",
            ]
    values = "".join(f"{gen.expr(e)}, " for e in replacement)
    body.append(f"    return ({values})")
    return body


def compile_clauses(clauses: Sequence, replacement: Sequence) -> Callable[[dict], Any] | None:
    """The generated `run(b)` (see the module docstring), or None if some expression cannot
    be compiled ahead (an unknown function): the interpreter then does all the work."""
    try:
        source, consts = generate(clauses, replacement)
    except (KeyError, TypeError):
        return None
    namespace = dict(consts)
    exec(code_cache.compiled(source, "<ngrules clauses>"), namespace)  # noqa: S102 - generated
    run = namespace["run"]
    run.source = source
    return run
