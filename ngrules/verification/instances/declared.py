"""A declared op's arguments built through its body, as a pattern.

`op ConvRelu(x, w, axes: axes, ...) = Relu(Convolution(x, w, axes=axes, ...))`: the op's own
generator puts every argument on one set of axes, which a convolution's input and filters never
share. Instead the body is read as a pattern (op calls as op patterns, `+ - * /` and `-` as
their ops, `broadcast(b, axes)` as a `Broadcast`, `maximum(a, 0)` and the other elementwise
builders as their ops, numbers as literals) with the rule's argument patterns in place of the
parameters; each op of the body gets the attributes the body fixes
(constants, defaults) and its plan solves the rest. The declared node is then made over the
argument nodes so built, its attributes read back from the body's nodes that received them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ngrules.errors import NgrulesError
from ngrules.ir.ops import OPS, REQUIRED
from ngrules.lang.declared_ops import DECLS
from ngrules.lang.expr import evaluate
from ngrules.lang.syntax import EBinary, ECall, ENum, EUnary, EVar, PLit, PNamed, POp, PVar

_BINARY = {"+": "Add", "-": "Subtract", "*": "Multiply", "/": "Divide"}
#: Front-end builders of the body that are one elementwise op on operands of equal axes.
_BUILDERS = {name: name.capitalize() for name in (
    "negative", "reciprocal", "sqrt", "exp", "log", "tanh", "sigmoid", "erf", "absolute", "sign",
    "add", "subtract", "multiply", "divide", "maximum", "minimum")}
_NAMES = itertools.count()


class NotAPattern(Exception):
    """The body holds something the builder cannot read as a pattern."""


@dataclass
class Inlined:
    """The body as a pattern: `root`; per argument the name its node is bound to; per op
    pattern of the body (by id) the attributes fixed there; per declared attribute the
    (bound name, attribute) of the body's node that carries it."""

    root: object
    args: list[str]
    fixed: dict[int, dict] = field(default_factory=dict)
    reads: dict[str, tuple[str, str]] = field(default_factory=dict)


def inline(op: str, args) -> Inlined | None:
    """The single-output body of a declared op as a pattern over `args`, or None."""
    decl = DECLS.get(op)
    if decl is None or len(decl.body) != 1 or OPS.get(op) is None or args is None:
        return None
    tag = f"#{op}{next(_NAMES)}"
    tensors = [p.name for p in decl.params if not p.is_attribute]
    attributes = {p.name for p in decl.params if p.is_attribute}
    named = [a.name if isinstance(a, (PVar, PNamed)) and a.name != "_" else None for a in args]
    names = [n or f"{tag}.{i}" for i, n in enumerate(named)]
    env = {t: a if n else PNamed(names[i], a)  # a named argument keeps its axes class
           for i, (t, n, a) in enumerate(zip(tensors, named, args))}
    out = Inlined(None, names)
    try:
        out.root = _pattern(decl.body[0], env, attributes, out, tag)
    except (NotAPattern, NgrulesError):
        return None
    return out


def _pattern(e, env: dict, attributes: set, out: Inlined, tag: str):
    if isinstance(e, EVar) and e.name in env:
        return env[e.name]
    if isinstance(e, ENum):
        return PLit(float(e.value))
    if isinstance(e, EBinary) and e.op in _BINARY:
        return _op(_BINARY[e.op], (e.left, e.right), (), env, attributes, out, tag)
    if isinstance(e, EUnary) and e.op == "-":
        return _op("Negative", (e.operand,), (), env, attributes, out, tag)
    if isinstance(e, ECall) and e.func == "broadcast" and len(e.args) == 2:
        return _op("Broadcast", e.args[:1], (("axes", e.args[1]),), env, attributes, out, tag)
    if isinstance(e, ECall) and _BUILDERS.get(e.func) in OPS and not e.kwargs:
        return _op(_BUILDERS[e.func], e.args, (), env, attributes, out, tag)
    if isinstance(e, ECall) and e.func in OPS:
        return _op(e.func, e.args, e.kwargs, env, attributes, out, tag)
    raise NotAPattern(type(e).__name__)


def _op(op: str, args, kwargs, env, attributes, out: Inlined, tag: str):
    spec = {a.name: a for a in OPS[op].attrs}
    fixed, given = {}, dict(kwargs)
    node = POp(op, tuple(_pattern(a, env, attributes, out, tag) for a in args), False)
    name = f"{tag}.{op}{len(out.fixed)}"
    for key, expr in given.items():
        if isinstance(expr, EVar) and expr.name in attributes:
            out.reads.setdefault(expr.name, (name, key))
        else:
            fixed[key] = _constant(evaluate(expr, {}))
    for key, a in spec.items():  # an attribute the body leaves out is the op's default
        if key not in given and key != "axes" and a.default is not REQUIRED:
            fixed.setdefault(key, a.default)
    out.fixed[id(node)] = fixed
    return PNamed(name, node)


def _constant(value):
    import numpy as np

    return np.asarray(value, np.int64) if isinstance(value, tuple) else value
