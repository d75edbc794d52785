"""Cost bounds of the expression language: how large its integers and sequences may grow.

Guards and lets have no loops, so their work is bounded by the size of their values. Python's
integers and tuples are unbounded (`pow(10, 100000000)` runs for minutes, `(0,) * 10**10`
exhausts memory); in the rules language an integer has at most `MAX_INT_BITS` bits and a
tuple or string at most `MAX_ITEMS` items. Arithmetic that would exceed them is refused before
it is computed. Floating-point arithmetic follows IEEE (overflow gives inf), as a tensor would.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ngrules.errors import NgrulesError
from ngrules.ir.axes import Axes

MAX_INT_BITS = 1024
MAX_ITEMS = 10_000
_SEQUENCES = (tuple, list, str)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _too_large(what: str) -> NgrulesError:
    return NgrulesError(
        f"{what} is too large: integers are limited to {MAX_INT_BITS} bits and tuples and "
        f"strings to {MAX_ITEMS} items"
    )


def bounded(value: Any) -> Any:
    """value itself, if within the bounds; else an error."""
    cls = value.__class__
    if cls is float or cls is bool or cls is Axes:  # the commonest: nothing to check
        return value
    if _is_int(value) and value.bit_length() > MAX_INT_BITS:
        raise _too_large(f"an integer of {value.bit_length()} bits")
    if isinstance(value, _SEQUENCES) and len(value) > MAX_ITEMS:
        raise _too_large(f"a {type(value).__name__} of {len(value)} items")
    return value


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
