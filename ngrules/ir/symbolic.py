"""Symbolic lengths: a dimension known only at run time (an ONNX `dim_param`), held by a stand-in.

An axis has an integer length. A dimension whose length is not known until the model runs (a
dynamic batch `N`, a sequence `S`) gets a stand-in length: a prime of at least 1,000,003 that
no static dimension of the model reaches, one per symbol. Since every static length is smaller
than the prime, a product of lengths is divisible by it exactly when it counts the symbolic
axis, so sizes, flattenings and shapes computed from stand-ins say which symbols they depend
on (`symbols_of`), and an exporter can write them back as run-time shapes.

A rule must not decide on or bake in such a length: the expression language reads lengths
through `known`, which raises `UnknownLength` for a value that depends on a symbol (the match
is rejected, and `explain` and the warnings say why).
"""

from __future__ import annotations

from collections.abc import Callable

from ngrules.errors import NgrulesError

#: The smallest stand-in length (a prime): larger than any dimension of a real model.
FIRST_STAND_IN = 1_000_003

#: stand-in length -> the symbol it stands for, for every symbol seen in this process.
STAND_INS: dict[int, str] = {}
_BY_SYMBOL: dict[str, int] = {}


class UnknownLength(NgrulesError):
    """A rule read the length of an axis whose length is only known at run time."""


def _is_prime(n: int) -> bool:
    if n < 2 or n % 2 == 0:
        return n == 2
    k = 3
    while k * k <= n:
        if n % k == 0:
            return False
        k += 2
    return True


def stand_in(symbol: str, above: int = 0) -> int:
    """The stand-in length of `symbol` (the same one each time, if it is larger than
    `above`, the longest static dimension of the model)."""
    known_length = _BY_SYMBOL.get(symbol)
    if known_length is not None and known_length > above:
        return known_length
    n = max(FIRST_STAND_IN, above + 1)
    while not _is_prime(n) or n in STAND_INS:
        n += 1
    STAND_INS[n] = symbol
    _BY_SYMBOL[symbol] = n
    return n


def factor(value: int) -> tuple[int, list[str]]:
    """value as (static part, the symbols whose stand-ins divide it, with repetition)."""
    symbols = []
    if STAND_INS and isinstance(value, int) and value > 0:
        for prime, symbol in STAND_INS.items():
            while value % prime == 0:
                value //= prime
                symbols.append(symbol)
    return value, symbols


def symbols_of(value) -> list[str]:
    """The symbols an integer (or a tuple of them) depends on."""
    if not STAND_INS:
        return []
    if isinstance(value, tuple):
        return [s for v in value for s in symbols_of(v)]
    if isinstance(value, bool) or not isinstance(value, int):
        return []
    return factor(value)[1]


def known(value, what: str | Callable[[], str] = "a length"):
    """value itself, unless it depends on a symbolic length: then `UnknownLength`, saying
    `what` (or what `what()` says: a node's repr costs, and is written only for the error)."""
    if STAND_INS:
        symbols = symbols_of(value)
        if symbols:
            what = what if isinstance(what, str) else what()
            raise UnknownLength(
                f"{what} depends on the symbolic length {symbols[0]!r} (known only at run time; "
                "the rule does not fire here)"
            )
    return value
