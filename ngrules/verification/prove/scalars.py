"""Elementwise ops as z3 real terms, each with the condition under which it is defined.

A `Sym` is one scalar of a tensor: a z3 real term and a z3 boolean saying where the real
function is defined (`x / y` needs y != 0, `Log(x)` x > 0, `Sqrt(x)` x >= 0). Arithmetic,
comparisons, max/min, select, abs and sign are exact real arithmetic; exp, log, sqrt, tanh and
sigmoid are uninterpreted functions constrained by the axioms in `AXIOMS` (listed in
docs/verification.md). Ops are looked up by name in `ENCODINGS`, so an op of the table without
an entry there has no encoding (`missing`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import z3

R = z3.RealSort()
EXP, LOG, SQRT = z3.Function("exp", R, R), z3.Function("log", R, R), z3.Function("sqrt", R, R)
TANH, SIGMOID = z3.Function("tanh", R, R), z3.Function("sigmoid", R, R)
ERF = z3.Function("erf", R, R)
#: x ** y for x < 0 (numpy defines it at integer y): unconstrained, so a proof cannot lean on it.
POW_NEGATIVE = z3.Function("pow_negative", R, R, R)


#: The variables of the axioms' patterns and bodies.
PATTERN_VARIABLES = _A, _B = z3.Reals("a b")


def _axiom_table() -> list[tuple[object, object]]:
    """(trigger pattern, body) for each axiom over _A, _B: true of the real functions."""
    a, b = _A, _B
    return [
        (EXP(a), EXP(a) > 0),
        (EXP(a + b), EXP(a + b) == EXP(a) * EXP(b)),
        (EXP(a - b), EXP(a - b) == EXP(a) / EXP(b)),
        (EXP(-a), EXP(-a) * EXP(a) == 1),
        (LOG(EXP(a)), LOG(EXP(a)) == a),
        (EXP(LOG(a)), z3.Implies(a > 0, EXP(LOG(a)) == a)),
        (LOG(a * b), z3.Implies(z3.And(a > 0, b > 0), LOG(a * b) == LOG(a) + LOG(b))),
        (LOG(a / b), z3.Implies(z3.And(a > 0, b > 0), LOG(a / b) == LOG(a) - LOG(b))),
        (SQRT(a), z3.Implies(a >= 0, z3.And(SQRT(a) >= 0, SQRT(a) * SQRT(a) == a))),
        (TANH(a), z3.And(TANH(-a) == -TANH(a), TANH(a) > -1, TANH(a) < 1)),
        (SIGMOID(a), SIGMOID(a) == 1 / (1 + EXP(-a))),
        (ERF(a), z3.And(ERF(-a) == -ERF(a), ERF(a) > -1, ERF(a) < 1)),
    ]


def _axioms(table: list[tuple[object, object]]) -> list[tuple[frozenset, object]]:
    """(the functions an axiom speaks of, the axiom), quantified over its pattern."""
    axioms = [EXP(0) == 1, LOG(1) == 0, TANH(0) == 0, ERF(0) == 0]
    for pattern, body in table:
        bound = [v for v in (_A, _B) if _occurs(v, pattern)]
        axioms.append(z3.ForAll(bound, body, patterns=[pattern]))
    return [(frozenset(_functions(ax)), ax) for ax in axioms]


def _occurs(var, term) -> bool:
    return var.eq(term) or any(_occurs(var, c) for c in term.children())


def applications(terms) -> list:
    """Every subterm of the terms (inside quantifiers too) that applies an uninterpreted
    function, each once."""
    seen, found, stack = set(), [], list(terms)
    while stack:
        t = stack.pop()
        if t.get_id() in seen:
            continue
        seen.add(t.get_id())
        if z3.is_quantifier(t):
            stack.append(t.body())
            continue
        if z3.is_app(t):
            if t.decl().kind() == z3.Z3_OP_UNINTERPRETED and t.num_args():
                found.append(t)
            stack.extend(t.children())
    return found


def _functions(term) -> set[str]:
    """The uninterpreted functions a term applies."""
    return {t.decl().name() for t in applications([term])}


def axioms_for(term) -> list:
    """The axioms about the functions the term uses (fewer quantifiers: faster answers)."""
    used = _functions(term)
    if "sigmoid" in used:
        used.add("exp")
    return [ax for names, ax in AXIOMS if names <= used]


#: Each axiom's trigger pattern and body (`ground` instantiates them on a claim's terms).
TRIGGERS = _axiom_table()
#: The axioms the uninterpreted functions obey (all true of the real functions), each with the
#: functions it speaks of.
AXIOMS = _axioms(TRIGGERS)


ONE, ZERO = z3.RealVal(1), z3.RealVal(0)


class Sym:
    """A real term and where it is defined; Python operators build terms (so numpy's object
    arrays can sum, multiply and matmul them)."""

    __slots__ = ("ok", "v")

    def __init__(self, v, ok=True):
        self.v, self.ok = v, ok

    @staticmethod
    def of(x) -> Sym:
        return x if isinstance(x, Sym) else Sym(z3.RealVal(_exact(x)))

    def __add__(self, o):
        o = Sym.of(o)
        return Sym(self.v + o.v, both(self.ok, o.ok))

    __radd__ = __add__

    def __mul__(self, o):
        o = Sym.of(o)
        return Sym(self.v * o.v, both(self.ok, o.ok))

    __rmul__ = __mul__

    def __sub__(self, o):
        o = Sym.of(o)
        return Sym(self.v - o.v, both(self.ok, o.ok))

    def __neg__(self):
        return Sym(-self.v, self.ok)


def both(a, b):
    """a and b, where either may be Python's True (defined everywhere): a product of inputs
    is then no z3 term at all (a Dot of object arrays makes thousands of them)."""
    if a is True:
        return b
    if b is True or a is b:
        return a
    return z3.And(a, b)


def _exact(x):
    """A float as the exact rational it is (0.1 as the binary fraction nearest 1/10)."""
    from fractions import Fraction

    f = Fraction(float(x))
    return f"{f.numerator}/{f.denominator}"


def _both(f) -> Callable:
    def enc(a: Sym, b: Sym, attrs) -> Sym:
        return Sym(f(a.v, b.v), both(a.ok, b.ok))

    return enc


def _one(f, domain=None) -> Callable:
    def enc(a: Sym, attrs) -> Sym:
        ok = a.ok if domain is None else z3.And(a.ok, domain(a.v))
        return Sym(f(a.v), ok)

    return enc


def _divide(a: Sym, b: Sym, attrs) -> Sym:
    return Sym(a.v / b.v, z3.And(a.ok, b.ok, b.v != 0))


def _relu(x: Sym, attrs) -> Sym:
    s = z3.RealVal(_exact(attrs["slope"]))
    return Sym(z3.If(x.v > 0, x.v, x.v * s), x.ok)


def _relu_bprop(d: Sym, x: Sym, attrs) -> Sym:
    s = z3.RealVal(_exact(attrs["slope"]))
    return Sym(z3.If(x.v > 0, d.v, d.v * s), z3.And(d.ok, x.ok))


def _where(c: Sym, a: Sym, b: Sym, attrs) -> Sym:
    return Sym(z3.If(c.v != 0, a.v, b.v), z3.And(c.ok, a.ok, b.ok))


def _power(a: Sym, b: Sym, attrs) -> Sym:
    """x ** y as numpy: a product for a small integer constant y; else exp(y log x) for x > 0,
    0 ** y is 1 at y = 0 and 0 for y > 0, and x < 0 only at integer y with a value left
    unconstrained (undefined elsewhere: numpy gives NaN or inf there)."""
    x, y = a.v, b.v
    if z3.is_rational_value(y) and y.denominator_as_long() == 1 and abs(y.as_long()) <= 8:
        return _integer_power(a, y.as_long(), b.ok)
    value = z3.If(x > 0, EXP(y * LOG(x)),
                  z3.If(x == 0, z3.If(y == 0, ONE, ZERO), POW_NEGATIVE(x, y)))
    defined = z3.Or(x > 0, z3.And(x == 0, y >= 0), z3.And(x < 0, z3.IsInt(y)))
    return Sym(value, z3.And(a.ok, b.ok, defined))


def _integer_power(a: Sym, k: int, ok) -> Sym:
    value = ONE
    for _ in range(abs(k)):
        value = value * a.v
    if k >= 0:
        return Sym(value, z3.And(a.ok, ok))
    return Sym(1 / value, z3.And(a.ok, ok, a.v != 0))


def _cast(a: Sym, attrs) -> Sym:
    """Cast to a float (the value itself: `tensors` refuses casts that round), an integer
    (numpy truncates toward 0; undefined outside the type's range) or bool (x != 0)."""
    dtype = np.dtype(attrs["dtype"])
    if dtype.kind == "b":
        return Sym(z3.If(a.v != 0, ONE, ZERO), a.ok)
    if dtype.kind == "f":
        return a
    info = np.iinfo(dtype)
    whole = z3.If(a.v >= 0, z3.ToReal(z3.ToInt(a.v)), -z3.ToReal(z3.ToInt(-a.v)))
    return Sym(whole, z3.And(a.ok, a.v > int(info.min) - 1, a.v < int(info.max) + 1))


def _truth(a):
    return a != 0


def _flag(cond) -> Callable:
    return _both(lambda a, b: z3.If(cond(a, b), z3.RealVal(1), z3.RealVal(0)))


#: op name -> encoding of its scalars (arguments, then the node's attributes).
ENCODINGS: dict[str, Callable] = {
    "Add": _both(lambda a, b: a + b),
    "Subtract": _both(lambda a, b: a - b),
    "Multiply": _both(lambda a, b: a * b),
    "Divide": _divide,
    "Maximum": _both(lambda a, b: z3.If(a >= b, a, b)),
    "Minimum": _both(lambda a, b: z3.If(a <= b, a, b)),
    "Greater": _flag(lambda a, b: a > b),
    "Less": _flag(lambda a, b: a < b),
    "GreaterEqual": _flag(lambda a, b: a >= b),
    "LessEqual": _flag(lambda a, b: a <= b),
    "Equal": _flag(lambda a, b: a == b),
    "NotEqual": _flag(lambda a, b: a != b),
    "Negative": _one(lambda a: -a),
    "Reciprocal": _one(lambda a: 1 / a, lambda a: a != 0),
    "Square": _one(lambda a: a * a),
    "Absolute": _one(lambda a: z3.If(a >= 0, a, -a)),
    "Erf": _one(lambda a: ERF(a)),
    "Power": _power,
    "Cast": _cast,
    "Sign": _one(lambda a: z3.If(a > 0, ONE, z3.If(a < 0, -ONE, ZERO))),
    "Sqrt": _one(lambda a: SQRT(a), lambda a: a >= 0),
    "Exp": _one(lambda a: EXP(a)),
    "Log": _one(lambda a: LOG(a), lambda a: a > 0),
    "Tanh": _one(lambda a: TANH(a)),
    "Sigmoid": _one(lambda a: SIGMOID(a)),
    "Relu": _relu,
    "ReluBprop": _relu_bprop,
    "Where": _where,
    "Select": _where,
    # on bools (0 or 1; `tensors` refuses them on integers, where they are bitwise)
    "And": _flag(lambda a, b: z3.And(_truth(a), _truth(b))),
    "Or": _flag(lambda a, b: z3.Or(_truth(a), _truth(b))),
    "Xor": _flag(lambda a, b: z3.Xor(_truth(a), _truth(b))),
    "Not": _one(lambda a: z3.If(_truth(a), ZERO, ONE)),
}
