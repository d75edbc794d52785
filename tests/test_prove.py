"""The z3 prover: elementwise identities proved for every shape, tensor rules for lengths up to
a bound, wrong rules refuted with a counterexample replayed numerically."""

from __future__ import annotations

import pytest

import ngrules as ng

z3 = pytest.importorskip("z3")

from ngrules.verification.prove import missing, prove_rule  # noqa: E402
from ngrules.verification.prove.prover import _instances, prove_instance  # noqa: E402


def rule(text: str):
    return ng.parse_rules(text, "p.rules").rules[0]


PROVED = ("proved", "proved-reals")


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("rule r: x * 1 => x", "proved"),  # in IEEE floats (z3's FP theory)
        ("rule r: -(-x) => x", "proved"),
        ("rule r: Log(Exp(a)) => a", "proved-reals"),  # exp and log: real axioms only
        # z3's FP theory cannot decide that float addition commutes in time: reals
        ("rule r: Maximum(x, y) + Minimum(x, y) => x + y", "proved-reals"),
        ("rule r: Greater(x, y) => Less(y, x)", "proved"),
        # rational identities over exp: decided with the axioms instantiated on their terms
        ("rule r: -(-(d / (1 + Exp(-x)) / (1 + Exp(-x))) * Exp(-x))"
         " => d * (Sigmoid(x) * (1 - Sigmoid(x)))", "proved-reals"),
        ("rule r: Log(Exp(a) / d) => a - Log(d)", "proved-reals"),
        ("rule r: d * Greater(x, 0) => ReluBprop(d, x)", "proved"),
    ],
)
def test_elementwise_identities_are_proved_for_every_shape(text, status):
    v = prove_rule(rule(text))
    assert v.status == status and v.bound is None, str(v)
    assert "(elementwise: every shape)" in str(v) or "; elementwise: every shape)" in str(v)
    assert ("over the reals" in str(v)) == (status == "proved-reals")


def held(v) -> bool:
    """Proved, proved within a bound, or z3 held on every layout of the shapes drawn (a
    sample: no proof, issue 35)."""
    return v.status in PROVED or v.status == "proved-bounded" \
        or "a sample of shapes, not a proof" in v.reason


def test_a_tensor_rule_outside_the_axis_groups_is_proved_within_a_bound_only():
    # Transpose reads axes by position: no reduction to axis groups, no proof for every shape;
    # every shape of ranks <= 3 and lengths <= 2 enumerated and proved: a bounded verdict
    v = prove_rule(rule("rule r: t @ Transpose(Transpose(x)) => x"), bound=2)
    assert v.status == "proved-bounded" and v.status not in PROVED, str(v)
    assert "proved for ranks <= 3 and lengths <= 2" in v.headline


def test_a_rule_over_axis_groups_is_proved_for_every_shape():
    # the drawn shapes sum over axes of length 1 (exact in floats); the structures of groups
    # sum over length 2, which rounds: proved over the reals, not in IEEE floats
    v = prove_rule(rule("rule r: r @ Sum(Sum(x)) => sum(x, reduction_axes=x.axes - r.axes)"))
    assert v.status == "proved-reals" and v.bound is None, str(v)
    assert "every shape: 16 structures of axis groups, each for every length" in v.reason


def test_a_wrong_rule_is_refuted_with_a_replayed_counterexample():
    v = prove_rule(rule("rule r: Maximum(x, y) * 2 => x + x"))
    assert v.status == "wrong"
    problem = v.counterexample.problem  # on special values first, else z3's model replayed
    assert "found by z3, replayed with the executor" in problem or "special values" in problem


def test_strict_semantics_sees_the_undefined_left_side():
    text = "rule r: x * (y / x) => y"
    assert prove_rule(rule(text)).status == "wrong"
    assert prove_rule(rule(text), semantics="refine").status == "proved-reals"  # 49·(1/49)


def test_a_model_that_does_not_reproduce_is_not_reported_as_wrong():
    # c^|r| computed in floats differs from the exact product by rounding only
    text = """rule r:
        p @ Prod(Broadcast(c: Constant)) if c.rank == 0
        => broadcast(constant(pow(value(c), size(p.reduction_axes)), dtype=c.dtype), p.axes)"""
    v = prove_rule(rule(text))
    assert v.status == "unverified"
    assert "does not reproduce numerically" in v.reason or held(v), str(v)


def test_an_ill_formed_rewrite_is_ill_formed_as_in_the_verifier():
    # on a flattened x the replacement changes the axes: the engine refuses the rewrite
    text = "rule r: Unflatten(Flatten(x)) => x"
    v = prove_rule(rule(text))  # on a drawn layout, or no proof (flatten reads positions)
    assert v.status == "ill-formed" or "a sample of shapes, not a proof" in v.reason, str(v)
    if v.failed:
        assert "the replacement cannot be built" in v.counterexample.problem
    assert ng.verify(rule(text), 40, prove=True)["r"].status == "ill-formed"

def test_a_rule_that_loops_alone_loops_as_in_the_verifier():
    v = prove_rule(rule("rule r: x + y => y + x"))
    assert v.status == "loops" and v.ok, str(v)
    assert "cycle" in v.reason and "each step proved, elementwise: every shape" in v.reason

def test_every_instance_stays_within_the_bound():
    for inst in _instances(rule("rule r: d @ Dot(x, y) => d * 1"), 2, 5):
        assert all(a.length <= 2 for n in ng.toposort(inst.outputs) for a in n.axes.leaves())
        assert prove_instance(inst).status == "proved"


def test_ops_without_an_encoding_are_listed_with_a_reason():
    gaps = missing()
    assert "BatchnormBprop" in gaps and "multi-output" in gaps["BatchnormBprop"]
    assert "Add" not in gaps and "Dot" not in gaps and "Slice" not in gaps
    encoded = {"Softmax", "Power", "Erf", "Tanh", "Sigmoid", "Pad", "Argmax", "Cast",
               "Convolution", "Pooling", "BatchnormFprop", "Output", "Absolute"}
    assert not encoded & set(gaps)


def test_verify_with_prove_proves_or_falls_back_to_testing():
    rules = ng.parse_rules("rule a: x * 1 => x\nrule b: Exp(x) * 2 => Exp(x) + Exp(x)", "p.rules")
    report = ng.verify(rules, 10, prove=True)
    assert report["a"].status == "proved"
    assert report["b"].status in ("proved-reals", "verified")


def test_the_axioms_are_instantiated_on_the_claims_own_terms():
    from ngrules.verification.prove.ground import ground_axioms
    from ngrules.verification.prove.scalars import EXP, SIGMOID

    x = z3.Real("x")
    facts = ground_axioms(SIGMOID(x) > 0)
    solver = z3.Solver()
    solver.add(*facts)
    assert not z3.is_quantifier(facts[0]) and facts
    solver.add(z3.Not(SIGMOID(x) == 1 / (1 + EXP(-x))))  # the sigmoid axiom, on x
    assert solver.check() == z3.unsat
    solver = z3.Solver()
    solver.add(*facts, EXP(-x) <= 0)  # and exp's positivity, on the term it brought
    assert solver.check() == z3.unsat


def test_a_rule_with_a_guard_is_proved_element_by_element_on_big_instances():
    v = prove_rule(rule("rule r: d - d * Less(0, x) + d * Greater(x, 0) if x.rank > 1 => d"))
    assert held(v) and v.status not in PROVED, str(v)  # a guard on ranks: no proof


#: Library rules that fold a constant: the constants are drawn exact in floats, and c * 0.1 folded
#: in floats is not the real c / 10, so these are proved over the reals only (checked on the
#: proofs of the file test below, not proved a second time).
FOLDING = {"simplify": {"sum_const", "prod_const"}}


@pytest.mark.parametrize("name", ["simplify", "relu", "dot", "shaping"])
def test_every_rule_of_the_encodable_library_files_holds(name):
    from ngrules.lang.shipped import library_path

    folding = set(FOLDING.get(name, ()))
    for rule in ng.load_rules(library_path() / f"{name}.rules").rules:
        v = prove_rule(rule, rank=1)  # a bounded proof at rank <= 1: the enumeration is short
        assert held(v), str(v)
        if rule.name in folding:
            folding.remove(rule.name)
            assert v.status != "proved", str(v)
    assert not folding, f"not in {name}.rules: {folding}"
