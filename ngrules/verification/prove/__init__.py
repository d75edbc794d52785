"""Proof of rules with the z3 SMT solver (the optional `prove` extra: pip install 'ngrules[prove]').

`prove_rule(rule, bound=3, rank=3)` proves a rule for all input values and every shape, or
for every shape of ranks <= rank and lengths <= bound, enumerated (`within`), or says why not
(z3 holding on the drawn instances is a sample, never a proof: issue 35); see `prover` and
`groups`. `missing()` lists the ops of the table without an encoding.
"""

from __future__ import annotations

#: Defaults of a proof's budget (one rule; `budget.Budget`): the library's slowest proof
#: takes 5 CPU seconds and well under 200 MB.
DEFAULT_SECONDS, DEFAULT_MEGABYTES = 60.0, 1024


def require_z3() -> None:
    """Raise a ProveUnavailable (an NgrulesError) saying how to install z3 when it is missing."""
    import importlib.util

    from ngrules.errors import NgrulesError

    if importlib.util.find_spec("z3") is None:
        raise NgrulesError("proving needs the z3 SMT solver: pip install 'ngrules[prove]'")


def prove_rule(rule, bound: int = 3, semantics: str = "strict", budget=None, rank: int = 3):
    """`budget`: (CPU seconds, z3 megabytes) for the whole proof, or a `budget.Budget`;
    None: the defaults (`budget.DEFAULT_SECONDS`, `DEFAULT_MEGABYTES`). Where no proof for
    every shape exists, every shape of ranks <= rank and lengths <= bound is enumerated and
    proved (`proved-bounded`, `within`)."""
    require_z3()
    from ngrules.verification.prove.budget import Budget
    from ngrules.verification.prove.prover import prove_rule as _prove

    if isinstance(budget, tuple):
        budget = Budget(*budget)
    return _prove(rule, bound, semantics, budget, rank)


def missing() -> dict[str, str]:
    """Ops of the table that instances cannot be unrolled through: op -> reason."""
    from ngrules.ir.ops import OPS
    from ngrules.verification.prove.tensors import encodable, missing_reason

    return {op: missing_reason(op) for op in sorted(OPS) if not encodable(op)}


__all__ = ["missing", "prove_rule", "require_z3"]
