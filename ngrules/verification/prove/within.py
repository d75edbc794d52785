"""A rule proved for every shape within a bound: `proved for ranks <= R and lengths <= L`.

Every graph of the pattern within the bound, in every layout (`bounded`), is judged as the
prover judges a drawn one (ill-formed, special values, narrower floats) and proved with z3
for all input values (and every value of a typed constant). The verdict is `proved-bounded`,
distinct from `proved`: `verify` still tests the rule on its random instances, which go beyond
the bound, and a failure there is the verdict (`verdicts.with_proof`).
"""

from __future__ import annotations

from ngrules.verification.prove.bounded import (
    Unbounded,
    every_layout,
    graphs,
    symbolic_constants,
)
from ngrules.verification.prove.budget import Budget
from ngrules.verification.prove.exact import exact
from ngrules.verification.prove.floats import encodable as fp_encodable
from ngrules.verification.prove.floats import prove_in_floats
from ngrules.verification.verdicts import Verdict


def prove_within(verdict: Verdict, semantics: str, budget: Budget, rank: int, length: int,
                 prover) -> str | None:
    """Set the verdict to `proved-bounded` (or `wrong`, `ill-formed`, `loops` with each step
    proved) and return None; else say why there is no bounded proof (the verdict unchanged).
    `prover`: the module `prover` (its `early_verdict`, `prove_instance` and `Proved`, passed in:
    it calls this). BudgetSpent when the proof's budget runs out."""
    try:
        found, builds = graphs(verdict.rule, rank, length, budget)
        laid = list(every_layout(found))
    except Unbounded as e:
        return str(e)
    if not laid:
        return "the rule fires on no graph within the bound"
    budget.left()
    if prover.early_verdict(verdict, laid, semantics):
        return None
    symbolic = [symbolic_constants(i) for i in laid]
    ieee = all(fp_encodable(i) for i in symbolic) and prove_in_floats(symbolic, semantics,
                                                                     budget)
    proved = prover.Proved()
    for inst, sym in zip(laid, () if ieee else symbolic):
        outcome = prover.prove_instance(sym, semantics, proved, budget)
        if outcome.status == "wrong" and sym is not inst:  # typed constants made symbols
            return ("z3 found a difference at values of a typed constant the rule may not "
                    "fire on")
        if outcome.status == "wrong":
            verdict.status, verdict.counterexample = "wrong", outcome.counterexample
            return None
        if outcome.status != "proved":
            return outcome.detail
    floats = "IEEE float16, float32 and float64; " if ieee else \
        "every op exact in IEEE floats; " if exact(laid) else "over the reals; "
    scope = (f"{len(found)} graphs of the pattern enumerated ({builds} built), "
             f"{len(laid)} layouts")
    verdict.status, verdict.examples = "proved-bounded", len(laid)
    verdict.bound, verdict.rank = length, rank
    verdict.reason = f"({floats}{scope})"
    loop = next((i.message for i in laid if i.stop != "fixpoint"), "")
    if loop:  # as the verifier says: sound, but the rule alone does not terminate
        verdict.status = "loops"
        verdict.reason = (f"{loop} (each step proved for ranks <= {rank} and lengths <= "
                          f"{length}: {scope})")
    return None
