"""The evaluator of guard, let and replacement expressions against a match's bindings.

`evaluate(expr, env)` walks the AST; env maps names to nodes and values. Nothing here calls
Python's eval: names resolve to bindings, calls resolve to ops (capitalised, built with
`make_node`) or to the function table. A failure raises `RuleError` located at the
sub-expression that failed.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ngrules.errors import NgrulesError, RuleError
from ngrules.ir.axes import Axes, Axis
from ngrules.ir.frontend import apply_op
from ngrules.ir.graph import Node, make_node
from ngrules.ir.ops import OPS, did_you_mean
from ngrules.ir.symbolic import known
from ngrules.lang.bounds import bounded, checked, divide, multiply
from ngrules.lang.functions import FUNCTIONS
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
    Expr,
)

Env = Mapping[str, Any]


class NotBoolean(Exception):
    """A guard's value was neither a boolean nor an integer (the interpreter reports it,
    located)."""


def guard_truth(value: Any) -> bool:
    """A guard's value as True or False: a bool of Python or numpy, or an integer of either
    (nonzero is true), also as a 0-d array; a guard over `p.paddings[0][0] == 0` gives a
    numpy bool, and its verdict must not depend on that. Anything else raises NotBoolean."""
    if value is True or value is False:
        return value
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, int, np.bool_, np.integer)):
        return bool(value)
    raise NotBoolean(value)

#: Attributes every node has, besides its op's attributes and derived properties.
NODE_ATTRIBUTES: dict[str, Callable[[Node], Any]] = {
    "axes": lambda n: n.axes,
    "dtype": lambda n: n.dtype,
    "rank": lambda n: len(n.axes),
    "op": lambda n: n.op,
    "args": lambda n: n.args,
    "shape": lambda n: known(n.axes.lengths, lambda: f"the shape of {n!r}"),
}
AXIS_ATTRIBUTES: dict[str, Callable[[Axis], Any]] = {
    "length": lambda a: known(a.length, f"the length of axis {a.name}"),
    "name": lambda a: a.name,
    "axes": lambda a: a.axes,
    "is_flattened": lambda a: a.is_flattened,
}
AXES_ATTRIBUTES: dict[str, Callable[[Axes], Any]] = {
    "names": lambda a: a.names,
    "lengths": lambda a: known(a.lengths, lambda: f"the lengths of {a!r}"),
    "size": lambda a: known(a.size, lambda: f"the size of {a!r}"),
}

#: The op definitions the attribute names were last computed from, and those names.
_ATTRIBUTES: list = [(), set()]


def all_attributes() -> set[str]:
    """Every attribute name some value can have (recomputed when the op table changes: ops
    taken out and others declared may leave it as long as it was)."""
    ops = tuple(OPS.values())
    if ops != _ATTRIBUTES[0]:  # the same definitions compare by identity: no deep compare
        names = {*NODE_ATTRIBUTES, *AXIS_ATTRIBUTES, *AXES_ATTRIBUTES}
        for op in ops:
            names.update(a.name for a in op.attrs)
            names.update(op.derived)
        _ATTRIBUTES[:] = [ops, names]
    return _ATTRIBUTES[1]


_BINARY: dict[str, Callable[[Any, Any], Any]] = {  # arithmetic within the language's bounds
    "+": checked(operator.add),
    "-": checked(operator.sub),
    "*": multiply,
    "/": divide,
    "|": checked(operator.or_),
    "&": checked(operator.and_),
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "in": lambda a, b: a in b,
}


def evaluate(expr: Expr, env: Env) -> Any:
    """The value of expr given the bindings in env."""
    try:
        return _EVAL[type(expr)](expr, env)
    except RuleError:
        raise
    except NgrulesError as e:
        raise RuleError(e.message, expr.span) from e
    except (ArithmeticError, TypeError, ValueError, IndexError, KeyError, AttributeError) as e:
        raise RuleError(f"{_describe(expr)} failed: {e}", expr.span) from e


def _describe(expr: Expr) -> str:
    if isinstance(expr, ECall):
        return f"{expr.func}(...)"
    if isinstance(expr, EBinary):
        return f"'{expr.op}'"
    if isinstance(expr, EAttr):
        return f"'.{expr.name}'"
    return "this expression"


def _var(e: EVar, env: Env) -> Any:
    try:
        return env[e.name]
    except KeyError:
        raise RuleError(f"variable {e.name!r} is not bound", e.span) from None


def get_attribute(value: Any, name: str) -> Any:
    """`value.name` in the rules language: node, Axis and Axes properties only."""
    if isinstance(value, Node):
        if name in NODE_ATTRIBUTES:
            return NODE_ATTRIBUTES[name](value)
        if name in value.attrs:
            return value.attrs[name]
        derived = OPS[value.op].derived
        if name in derived:
            return derived[name](value)
        names = [*NODE_ATTRIBUTES, *value.attrs, *derived]
        raise NgrulesError(
            f"a {value.op} node has no attribute {name!r}{did_you_mean(name, names)}"
        )
    for kind, table in ((Axis, AXIS_ATTRIBUTES), (Axes, AXES_ATTRIBUTES)):
        if isinstance(value, kind):
            if name in table:
                return table[name](value)
            hint = did_you_mean(name, table)
            raise NgrulesError(f"an {kind.__name__} has no attribute {name!r}{hint}")
    raise NgrulesError(f"{type(value).__name__} {value!r} has no attribute {name!r}")


def _attr(e: EAttr, env: Env) -> Any:
    return get_attribute(evaluate(e.obj, env), e.name)


def _index(e: EIndex, env: Env) -> Any:
    return index_value(evaluate(e.obj, env), evaluate(e.index, env))


def index_value(obj: Any, index: Any) -> Any:
    """`obj[index]`: output `index` of a multi-output node, else ordinary indexing."""
    if isinstance(obj, Node):
        if obj.outputs is None:
            raise NgrulesError(f"only a multi-output node can be indexed; {obj.op} has one output")
        count = len(obj.outputs)
        if not isinstance(index, int) or not -count <= index < count:
            raise NgrulesError(f"{obj.op} has {count} outputs; index {index!r} is out of range")
        return make_node("Output", (obj,), index=index % count)
    return obj[index]


def _slice(e: ESlice, env: Env) -> Any:
    obj = evaluate(e.obj, env)
    start = None if e.start is None else evaluate(e.start, env)
    stop = None if e.stop is None else evaluate(e.stop, env)
    return obj[start:stop]


def _call(e: ECall, env: Env) -> Any:
    args = [evaluate(a, env) for a in e.args]
    kwargs = {k: evaluate(v, env) for k, v in e.kwargs}
    return call(e, args, kwargs)


def call(e: ECall, args: list, kwargs: dict) -> Any:
    """Apply the op or library function `e` names to evaluated arguments."""
    if e.func in OPS:
        return apply_op(e.func, args, kwargs)
    fdef = FUNCTIONS.get(e.func)
    if fdef is None:
        raise NgrulesError(f"unknown function {e.func!r}{did_you_mean(e.func, FUNCTIONS)}")
    try:
        return bounded(fdef.fn(*args, **kwargs))
    except NgrulesError:
        raise
    except Exception as err:  # a registered Python function failed: say which
        raise RuleError(f"{e.func}(...) failed: {type(err).__name__}: {err}", e.span) from err


def _binary(e: EBinary, env: Env) -> Any:
    if e.op == "and":
        return bool(evaluate(e.left, env)) and bool(evaluate(e.right, env))
    if e.op == "or":
        return bool(evaluate(e.left, env)) or bool(evaluate(e.right, env))
    return _BINARY[e.op](evaluate(e.left, env), evaluate(e.right, env))


def _unary(e: EUnary, env: Env) -> Any:
    value = evaluate(e.operand, env)
    return (not value) if e.op == "not" else -value


_EVAL: dict[type, Callable[[Any, Env], Any]] = {
    ENum: lambda e, env: e.value,
    EStr: lambda e, env: e.value,
    EBool: lambda e, env: e.value,
    ETuple: lambda e, env: bounded(tuple(evaluate(i, env) for i in e.items)),
    EVar: _var,
    EAttr: _attr,
    EIndex: _index,
    ESlice: _slice,
    ECall: _call,
    EBinary: _binary,
    EUnary: _unary,
}


# -- compiled expressions --------------------------------------------------------------------
def compile_expr(expr: Expr) -> Callable[[Env], Any]:
    """A closure computing what `evaluate(expr, env)` computes, without walking the AST.

    When it fails, the expression is evaluated again by `evaluate`, which raises the error
    located at the sub-expression responsible (expressions are pure, so this is the same
    computation).
    """
    fast = _compile(expr)

    def run(env: Env) -> Any:
        try:
            return fast(env)
        except Exception:
            return evaluate(expr, env)

    return run


def _compile(e: Expr) -> Callable[[Env], Any]:
    kind = type(e)
    if kind in (ENum, EStr, EBool):
        value = e.value
        return lambda env: value
    if kind is EVar:
        name = e.name
        return lambda env: env[name]
    if kind is EAttr:
        obj, name = _compile(e.obj), e.name
        return lambda env: get_attribute(obj(env), name)
    if kind is EIndex:
        obj, index = _compile(e.obj), _compile(e.index)
        return lambda env: index_value(obj(env), index(env))
    if kind is ESlice:
        return _compile_slice(e)
    if kind is ECall:
        return _compile_call(e)
    if kind is EBinary:
        return _compile_binary(e)
    if kind is EUnary:
        operand = _compile(e.operand)
        if e.op == "not":
            return lambda env: not operand(env)
        return lambda env: -operand(env)
    items = [_compile(i) for i in e.items]
    return lambda env: bounded(tuple(i(env) for i in items))


def _compile_slice(e: ESlice) -> Callable[[Env], Any]:
    obj = _compile(e.obj)
    start = _compile(e.start) if e.start is not None else lambda env: None
    stop = _compile(e.stop) if e.stop is not None else lambda env: None
    return lambda env: obj(env)[start(env) : stop(env)]


def _compile_call(e: ECall) -> Callable[[Env], Any]:
    args = [_compile(a) for a in e.args]
    kwargs = [(k, _compile(v)) for k, v in e.kwargs]
    return lambda env: call(e, [a(env) for a in args], {k: v(env) for k, v in kwargs})


def _compile_binary(e: EBinary) -> Callable[[Env], Any]:
    left, right = _compile(e.left), _compile(e.right)
    if e.op == "and":
        return lambda env: bool(left(env)) and bool(right(env))
    if e.op == "or":
        return lambda env: bool(left(env)) or bool(right(env))
    op = _BINARY[e.op]
    return lambda env: op(left(env), right(env))
