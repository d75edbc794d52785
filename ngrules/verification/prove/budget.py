"""One budget for a whole proof: CPU seconds and z3 memory, and a bound on the terms z3 gets.

z3's step limit (`rlimit`) and the CPU stop of one query (`cpustop`) bound one query, not a
rule's proof of many elements in many layouts; and neither bounds memory: 40 declared ops, each
the square of the one before (1.2 kB), grew z3 to 3.3 GB inside one call (issue 37, F7). A
proof now has a budget of CPU seconds and megabytes (`verify --prove-seconds/--prove-memory`):
z3's own `memory_max_size` is set to the megabytes, the CPU time is checked before each query
and caps each query's stop, and a term whose degree as a polynomial is above `MAX_DEGREE`
(`x` squared 40 times: 2**40, in 40 shared nodes) is never handed to z3. Each ends the proof
as `unverified`, with a reason that names the budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import z3

from ngrules.verification.prove import DEFAULT_MEGABYTES, DEFAULT_SECONDS

#: The highest degree of a claim's terms as polynomials: 40 squares are 2**40.
MAX_DEGREE = 4096


class BudgetSpent(Exception):
    """The proof's budget ran out; the message says which and how to raise it."""


@dataclass
class Budget:
    """A proof's CPU seconds and z3 megabytes; `start()` begins it."""

    seconds: float = DEFAULT_SECONDS
    megabytes: int = DEFAULT_MEGABYTES
    _end: float = field(default=0.0, repr=False)

    def start(self) -> Budget:
        self._end = time.process_time() + self.seconds
        z3.set_param("memory_max_size", int(self.megabytes))
        return self

    def left(self) -> float:
        """CPU seconds left; BudgetSpent if none."""
        left = self._end - time.process_time()
        if left <= 0:
            raise BudgetSpent(f"the proof's budget of {self.seconds:g} CPU seconds ran out "
                              "(verify --prove-seconds)")
        return left

    def memory_spent(self) -> BudgetSpent:
        return BudgetSpent(f"z3 reached the proof's memory budget of {self.megabytes} MB "
                           "(verify --prove-memory)")


def check_size(*terms) -> None:
    """BudgetSpent if a term, read as a polynomial, has a degree above MAX_DEGREE (what z3's
    arithmetic multiplies out: `x` squared 40 times has degree 2**40 in 40 shared nodes, while
    a softmax's terms written out as trees hold 50 million operations of degree 6)."""
    degrees: dict[int, int] = {}
    for term in terms:
        if _degree(term, degrees) > MAX_DEGREE:
            raise BudgetSpent(f"the terms to prove are too large: of degree more than "
                              f"{MAX_DEGREE:,} as polynomials (ops nested as squares of squares?)")


_SUM = {z3.Z3_OP_MUL, z3.Z3_OP_DIV}
_ATOM = {z3.Z3_OP_UNINTERPRETED}


def _combine(t, kids: list[int]) -> int:
    """The degree of t from its arguments' (uninterpreted functions are atoms: degree 1)."""
    kind = t.decl().kind()
    if kind in _SUM:
        return sum(kids)
    if kind == z3.Z3_OP_POWER:
        exponent = t.arg(1)
        n = exponent.as_long() if z3.is_int_value(exponent) else MAX_DEGREE + 1
        return kids[0] * max(n, 1)
    if kind in _ATOM:  # a variable, or f(x) for a function z3 does not know
        return 1
    if not kids:
        return 0 if z3.is_rational_value(t) or z3.is_algebraic_value(t) else 1
    return max(kids)


def _degree(term, degrees: dict[int, int]) -> int:
    """term's degree, capped just above MAX_DEGREE (no recursion)."""
    stack = [(term, False)]
    while stack:
        t, ready = stack.pop()
        key = t.get_id()
        if key in degrees:
            continue
        kids = t.children() if z3.is_app(t) else []
        if ready or not kids:
            found = _combine(t, [degrees[k.get_id()] for k in kids]) if z3.is_app(t) else 1
            degrees[key] = min(found, MAX_DEGREE + 1)
        else:
            stack.append((t, True))
            stack.extend((k, False) for k in kids if k.get_id() not in degrees)
    return degrees[term.get_id()]
