"""`assume` clauses read as value ranges: the author's promise about a pattern variable's values.

`assume -30 <= x and x <= 30` (or `abs(x) <= 30`) says every element of x lies in [-30, 30].
The engine cannot see tensor values, so it never checks an assumption when it rewrites (like a
fast-math flag, it is the author's promise); verification draws x within the range and says so
in its verdict, and the prover adds the range as a precondition. Here each clause is checked
(only comparisons of one pattern variable with a number, joined by `and`) and the comparisons
of each variable are intersected into one `Assumption`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import field, replace

import numpy as np

from ngrules.errors import Span
from ngrules.lang.formatter import format_expr
from ngrules.lang.syntax import Assume, EBinary, ECall, ENum, EVar, Expr
from ngrules.records import frozen

Report = Callable[[str, Span | None], None]

_SHAPE = ("an assumption compares a pattern variable with a number (`x <= 30`, `-1 < x`, "
          "`abs(x) <= 30`), several joined by `and`")
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


@frozen
class Assumption:
    """Every element of the variable `name` lies between `low` and `high` (±inf: no bound);
    an open end excludes the bound itself (`x < 30`)."""

    name: str
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    span: Span | None = field(default=None, compare=False, repr=False)

    @property
    def empty(self) -> bool:
        """No value satisfies it (the author contradicted themselves)."""
        return self.low > self.high or self.low == self.high and (self.low_open or self.high_open)

    def closed(self, dtype=np.float64) -> tuple[float, float]:
        """The smallest and largest values of a float dtype in the range (open ends and bounds
        the dtype cannot hold rounded inwards), so values clipped to them stay in the range."""
        kind = np.dtype(dtype).type if np.dtype(dtype).kind == "f" else np.float64
        with np.errstate(over="ignore"):  # a bound beyond the dtype's range: its largest
            low, high = kind(self.low), kind(self.high)
        if float(low) < self.low or self.low_open and float(low) == self.low:
            low = np.nextafter(low, kind(math.inf))
        if float(high) > self.high or self.high_open and float(high) == self.high:
            high = np.nextafter(high, kind(-math.inf))
        return float(low), float(high)

    def admits(self, values) -> bool:
        """Whether every element of values lies in the range (NaN never does)."""
        low, high = self.closed()
        v = np.asarray(values, np.float64)
        return bool(np.all((v >= low) & (v <= high)))

    def meet(self, other: Assumption) -> Assumption:
        """The values both ranges admit."""
        low, low_open = max((self.low, self.low_open), (other.low, other.low_open))
        high, high_open = min((self.high, not self.high_open), (other.high, not other.high_open))
        return replace(self, low=low, high=high, low_open=low_open, high_open=not high_open)

    def __str__(self) -> str:
        low, high = math.isfinite(self.low), math.isfinite(self.high)
        below, above = "<" if self.low_open else "<=", "<" if self.high_open else "<="
        if low and high:
            return f"{_number(self.low)} {below} {self.name} {above} {_number(self.high)}"
        if high:
            return f"{self.name} {above} {_number(self.high)}"
        if low:
            return f"{self.name} {'>' if self.low_open else '>='} {_number(self.low)}"
        return f"{self.name} is any value"


def _number(value: float) -> str:
    return format_expr(ENum(value))


def describe(assumptions: Iterable[Assumption]) -> str:
    """`x <= 30 and y > 0`: the assumptions as a verdict shows them."""
    return " and ".join(str(a) for a in assumptions)


# -- reading the clauses ----------------------------------------------------------------------
def _conjuncts(expr: Expr) -> list[Expr]:
    out, stack = [], [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, EBinary) and e.op == "and":
            stack += [e.right, e.left]
        else:
            out.append(e)
    return out


def _subject(e: Expr) -> tuple[EVar, bool] | None:
    """The variable compared, and whether it is under `abs(...)`."""
    if isinstance(e, EVar):
        return e, False
    if isinstance(e, ECall) and e.func == "abs" and len(e.args) == 1 and not e.kwargs:
        inner = e.args[0]
        return (inner, True) if isinstance(inner, EVar) else None
    return None


def _bound(e: Expr) -> float | None:
    if not isinstance(e, ENum):
        return None
    try:
        value = float(e.value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _range(name: str, op: str, number: float, absolute: bool, span) -> Assumption | None:
    """The range `name op number` (or `abs(name) op number`) stands for; None if not one range."""
    strict = op in ("<", ">")
    if op in ("<", "<="):
        if absolute:
            return Assumption(name, -number, number, strict, strict, span)
        return Assumption(name, high=number, high_open=strict, span=span)
    if absolute:
        return None  # abs(x) >= c: two rays, not one range
    return Assumption(name, low=number, low_open=strict, span=span)


class _Reader:
    """Reads the comparisons of a rule's assume clauses, reporting each bad one where it is."""

    def __init__(self, bound: set[str], lets: set[str], report: Report):
        self.bound, self.lets, self.report = bound, lets, report

    def comparison(self, e: Expr) -> Assumption | None:
        if not (isinstance(e, EBinary) and e.op in _FLIPPED):
            self.report(_SHAPE, e.span)
            return None
        op, subject, number = e.op, _subject(e.left), _bound(e.right)
        if subject is None or number is None:
            op, subject, number = _FLIPPED[e.op], _subject(e.right), _bound(e.left)
        if subject is None or number is None:
            self.report(_SHAPE, e.span)
            return None
        var, absolute = subject
        if not self.known(var):
            return None
        found = _range(var.name, op, number, absolute, e.span)
        if found is None:
            self.report(f"{_SHAPE}; `abs({var.name}) {op} ...` is not one range", e.span)
        return found

    def known(self, var: EVar) -> bool:
        if var.name in self.bound:
            return True
        if var.name == "_":
            self.report("'_' is a wildcard: it binds nothing, so nothing can be assumed of it",
                        var.span)
        elif var.name in self.lets:
            self.report(f"{var.name!r} is a let value; an assumption is about a pattern variable "
                        "(a tensor the rule matches)", var.span)
        else:
            self.report(f"variable {var.name!r} is never bound by the pattern (an assumption is "
                        "about a pattern variable)", var.span)
        return False


#: `assume reals`: the rule is a rewrite of real numbers (as a fast-math flag allows), not
#: of IEEE floats: verification judges it over the reals, and its verdict says so.
REALS = "reals"


def over_the_reals(clause, bound: set[str] = frozenset()) -> bool:
    """Whether the clause is `assume reals` (unless the pattern binds a variable `reals`)."""
    return (isinstance(clause, Assume) and isinstance(clause.expr, EVar)
            and clause.expr.name == REALS and REALS not in bound)


def read_assumptions(clauses, bound: set[str], lets: set[str], report: Report
                     ) -> tuple[Assumption, ...]:
    """One Assumption per variable the `assume` clauses speak of (their ranges intersected),
    in order of first mention; every bad comparison or empty range is reported."""
    reader = _Reader(bound, lets, report)
    ranges: dict[str, Assumption] = {}
    for clause in clauses:
        if not isinstance(clause, Assume) or over_the_reals(clause, bound):
            continue
        for part in _conjuncts(clause.expr):
            found = reader.comparison(part)
            if found is None:
                continue
            before = ranges.get(found.name)
            ranges[found.name] = found if before is None else before.meet(found)
            if ranges[found.name].empty and (before is None or not before.empty):
                both = found if before is None else f"{before} and {found}"
                report(f"the assumptions on {found.name!r} admit no value ({both})", part.span)
    return tuple(ranges.values())

