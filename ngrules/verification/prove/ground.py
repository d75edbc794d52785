"""The axioms instantiated on a claim's own terms, so z3 can decide it without quantifiers.

Quantified axioms send z3 to pattern-based instantiation, where nonlinear real arithmetic is
out of reach (a rational identity such as sigmoid's derivative times out). Instantiating each
axiom on the terms its trigger matches in the claim (a few rounds, as instances bring new
terms) gives a quantifier-free formula that z3's nonlinear solver decides at once. Fewer
facts than the axioms: `unsat` is a proof, but a model may break an axiom not instantiated,
so the prover replays it numerically or falls back to the quantified axioms.
"""

from __future__ import annotations

import z3

from ngrules.verification.prove.scalars import PATTERN_VARIABLES, TRIGGERS, applications

_A, _B = PATTERN_VARIABLES

#: Rounds of instantiation, and a cap on instances (each round's terms feed the next).
ROUNDS, LIMIT = 3, 2000


def _match(pattern, term, bound: dict) -> bool:
    """Whether term is an instance of pattern, binding _A and _B in `bound` (by id)."""
    if pattern.eq(_A) or pattern.eq(_B):
        seen = bound.get(pattern.get_id())
        if seen is None:
            bound[pattern.get_id()] = term
            return True
        return seen.eq(term)
    if not z3.is_app(term) or term.num_args() != pattern.num_args():
        return False
    if not term.decl().eq(pattern.decl()):
        return False
    return all(_match(p, t, bound) for p, t in zip(pattern.children(), term.children()))


def ground_axioms(claim) -> list:
    """Instances of the axioms on the claim's terms (and on the terms they bring)."""
    facts, done, frontier = [], set(), [claim]
    for _ in range(ROUNDS):
        new = []
        for term in applications(frontier):
            for i, (pattern, body) in enumerate(TRIGGERS):
                bound: dict = {}
                if not _match(pattern, term, bound):
                    continue
                key = (i, *sorted((k, v.get_id()) for k, v in bound.items()))
                if key in done:
                    continue
                done.add(key)
                pairs = [(v, bound[v.get_id()]) for v in (_A, _B) if v.get_id() in bound]
                new.append(z3.substitute(body, *pairs))
        if not new or len(facts) > LIMIT:
            break
        facts += new
        frontier = new
    return facts
