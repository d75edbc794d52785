"""Cost bounds of the expression language: how large its integers and sequences may grow.

Guards and lets have no loops, so their work is bounded by the size of their values. Python's
integers and tuples are unbounded (`pow(10, 100000000)` runs for minutes, `(0,) * 10**10`
exhausts memory); in the rules language an integer has at most `MAX_INT_BITS` bits and a
value at most `MAX_ITEMS` items, a tuple's items counted with the items of the tuples and
strings in it (three levels of 8,192 shared items are 5e11 items to compare, minutes inside
one C call that no signal stops). Arithmetic that would exceed them is refused before it is
computed. Floating-point arithmetic follows IEEE (overflow gives inf), as a tensor would.
"""

from __future__ import annotations

import operator
import reprlib
from typing import Any

import numpy as np

from ngrules.errors import NgrulesError
from ngrules.ir.axes import Axes
from ngrules.lang.syntax import children

MAX_INT_BITS = 1024
MAX_ITEMS = 10_000
_SEQUENCES = (tuple, list, str)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _too_large(what: str) -> NgrulesError:
    return NgrulesError(
        f"{what} is too large: integers are limited to {MAX_INT_BITS} bits and values to "
        f"{MAX_ITEMS} items (the items of nested tuples and strings counted)"
    )


def total_items(value: Any, limit: int = MAX_ITEMS) -> int:
    """The items of a tuple, list or string, with those of the sequences in it counted at
    each place they appear; the count stops once above limit (so it costs at most ~limit)."""
    stack, total = [value], 0
    while stack:
        v = stack.pop()
        total += len(v)
        if total > limit:
            return total
        if v.__class__ is not str:
            stack.extend(i for i in v if isinstance(i, _SEQUENCES))
    return total


def bounded(value: Any) -> Any:
    """value itself, if within the bounds; else an error."""
    cls = value.__class__
    if cls is float or cls is bool or cls is Axes:  # the commonest: nothing to check
        return value
    if _is_int(value) and value.bit_length() > MAX_INT_BITS:
        raise _too_large(f"an integer of {value.bit_length()} bits")
    if isinstance(value, _SEQUENCES) and total_items(value) > MAX_ITEMS:
        raise _too_large(f"a {type(value).__name__} of more than {MAX_ITEMS} items")
    return value


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxtuple, _SHOWN.maxlist, _SHOWN.maxstring = 3, 8, 8, 60
_SHOWN.maxother = 200


def shown(value: Any, width: int = 200) -> str:
    """value's repr, bounded: at most 8 items of a tuple, 3 levels deep, `width` characters
    (a whole repr of a value within the bounds can still be 10,000 items long; one built
    past them, by a Python function, could take minutes)."""
    text = _SHOWN.repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def items_at_least(e, known: dict[str, int], report) -> int:
    """A lower bound on the items of expression e's value, read from the text alone (tuple
    literals, strings, `+` of them, lets in `known`); `report(n, e)` is called at the
    innermost sub-expression certain to exceed MAX_ITEMS (the checker's cost bound)."""
    kind = type(e).__name__
    if kind == "EStr":
        return len(e.value)
    if kind == "EVar":
        return known.get(e.name, 0)
    if kind == "ETuple":
        parts = [items_at_least(i, known, report) for i in e.items]
        total = len(e.items) + sum(parts)
    elif kind == "EBinary" and e.op == "+":
        parts = [items_at_least(x, known, report) for x in (e.left, e.right)]
        total = sum(parts)
    else:  # not a sequence the text can size: its parts may still be too large
        for part in children(e):
            items_at_least(part, known, report)
        return 0
    if total > MAX_ITEMS and max(parts, default=0) <= MAX_ITEMS:
        report(total, e)
    return min(total, MAX_ITEMS + 1)


def multiply(a: Any, b: Any) -> Any:
    """`a * b`, refused before it is computed if the result would be too large."""
    if _is_int(a) and _is_int(b):
        if a.bit_length() + b.bit_length() > MAX_INT_BITS + 1:
            raise _too_large("the product")
    elif isinstance(a, _SEQUENCES) or isinstance(b, _SEQUENCES):
        seq, n = (a, b) if isinstance(a, _SEQUENCES) else (b, a)
        if _is_int(n) and len(seq) * max(n, 0) > MAX_ITEMS:
            raise _too_large(f"repeating {len(seq)} items {n} times")
    return bounded(operator.mul(a, b))


def divide(a: Any, b: Any) -> Any:
    """`a / b`; a float divided by zero as IEEE floats do (±inf, or NaN for 0 / 0), as the
    tensor a rule folds the value into would compute (`x * (1 / value(c))` at c = 0).
    Integers (ranks, sizes) divided by zero stay an error."""
    numbers = all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                  for v in (a, b))
    floats = any(isinstance(v, (float, np.floating)) for v in (a, b))
    if numbers and floats and b == 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            return float(np.float64(a) / np.float64(b))
    return operator.truediv(a, b)


def power(a: Any, b: Any) -> Any:
    """`a` to the power `b`: exact for integers (within the bounds), IEEE for floats (inf when
    it overflows, nan where it is undefined), never a complex number."""
    if _is_int(a) and _is_int(b) and b >= 0:
        if abs(a) > 1 and (abs(a).bit_length() - 1) * b > MAX_INT_BITS:
            raise _too_large(f"pow({a}, {b})")
        return bounded(a**b)
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        raise NgrulesError(f"pow needs two numbers, got {type(a).__name__} and {type(b).__name__}")
    with np.errstate(all="ignore"):
        return float(np.power(np.float64(a), np.float64(b)))


def checked(op):
    """A binary operator whose result is checked against the bounds."""

    def run(a: Any, b: Any) -> Any:
        return bounded(op(a, b))

    return run
