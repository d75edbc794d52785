"""Proved means proved for what runs: IEEE corners (special values) veto a proof, a proof that
rounds in floats is `proved-reals`, bounded proofs try every layout, and a solver's model
under the tolerance is widened, never dropped (issue 22's probes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ngrules as ng
from ngrules.verification.verify import verify

z3 = pytest.importorskip("z3")

PROBES = """
pass probes
rule cancel:    (x + y) - y => x
rule times0:    x * 0 => 0
rule equal:     Equal(x, x) => 1
rule minimum:   Minimum(x, 2e6) => x
"""


def test_the_float_probes_are_wrong_on_special_values():
    report = verify(ng.parse_rules(PROBES), 10)
    assert [v.status for v in report] == ["wrong"] * 4, str(report)
    assert "special values" in report["times0"].counterexample.problem


def test_a_proof_that_rounds_is_over_the_reals_and_an_exact_one_is_proved():
    from ngrules.verification.prove import prove_rule

    rules = ng.parse_rules("pass p\nrule swap: Log(Exp(x)) => x\nrule neg: -(-x) => x\n")
    swap, neg = prove_rule(rules.rule("swap")), prove_rule(rules.rule("neg"))
    assert swap.status == "proved-reals" and "proved over the reals" in swap.headline
    assert neg.status == "proved", str(neg)


def test_every_layout_is_tried_and_the_reordered_constant_is_ill_formed():
    from ngrules.verification.instances.sampling import rewrite_instance
    from ngrules.verification.layouts import layouts
    from ngrules.verification.verdicts import ill_formed

    rule = ng.parse_rules("pass p\nrule r: a - Broadcast?(c: Constant) => a + -c\n").rule("r")
    A, B = ng.make_axis(2, name="a"), ng.make_axis(3, name="b")
    a = ng.placeholder([A, B], name="a", dtype=np.float64)
    c = ng.constant(np.arange(6.0).reshape(2, 3), [A, B], dtype=np.float64)
    drawn = rewrite_instance(rule, [a - c], {a: np.ones((2, 3))})
    assert ill_formed(drawn) is None  # the drawn layout is fine
    laid = list(layouts(drawn))
    assert len(laid) >= 3
    assert any(ill_formed(i) is not None for i in laid)


def test_a_model_under_the_tolerance_is_widened_not_dropped():
    from ngrules.verification.prove.prover import _instances, prove_instance

    rule = ng.parse_rules("pass p\nrule m: Minimum(x, 2e6) => x\n").rule("m")
    outcome = prove_instance(_instances(rule, 1, 1)[0])
    assert outcome.status == "wrong" and "found by z3" in outcome.detail


NARROW = """
pass narrow
rule single: (x * 1e20) * 1e20 => x * 1e40
rule half:   (x * 300) * 300 => x * 90000
"""


@pytest.mark.parametrize("name, dtype", [("single", "float32"), ("half", "float16")])
def test_a_narrow_dtype_counterexample_vetoes_a_proof_over_the_reals(name, dtype):
    # true over the reals and in float64, but the folded constant is inf in the narrow dtype
    from ngrules.verification.prove import prove_rule

    verdict = prove_rule(ng.parse_rules(NARROW).rule(name))
    assert verdict.status == "wrong", str(verdict)
    assert f"results differ in {dtype}" in verdict.counterexample.problem
    before, after = verdict.counterexample.expected[0], verdict.counterexample.got[0]
    assert np.isfinite(before).all() and not np.isfinite(after).all()  # checked by numpy


def test_no_rule_of_the_narrow_dtype_class_is_proved():
    path = Path(__file__).parent / "corpus" / "wrong" / "class14_dtypes.rules"
    report = verify(list(ng.load_rules(path).rules), 10, prove=True)
    assert [v.status for v in report] == ["wrong"] * len(report), str(report)


def test_products_by_one_and_sums_with_zero_are_exact_in_floats():
    from ngrules.verification.prove.exact import exact_node

    a = ng.make_axis(2, "a")
    x = ng.placeholder([a], name="x", dtype=np.float64)
    one, minus, zero, two = (ng.constant(v, dtype=np.float64) for v in (1.0, -1.0, 0.0, 2.0))
    spread = ng.broadcast(one, [a])
    assert all(exact_node(n) for n in (x * spread, minus * x, x / minus, x + zero, x - zero))
    assert not any(exact_node(n) for n in (x * two, one / x, zero - x, x + one))
    i = ng.placeholder([], name="i", dtype=np.int32)
    assert not exact_node(i * ng.constant(1, dtype=np.int32))  # integer arithmetic wraps
    u = ng.make_axis(1, "u")
    column = ng.placeholder([a, u], name="c", dtype=np.float64)
    assert exact_node(ng.sum(column, reduction_axes=[u]))  # one term per result
    assert not exact_node(ng.sum(column, reduction_axes=[a]))
    rule = ng.load_library().rule("mul_one")  # a guard on dtypes only: pointwise, in IEEE
    from ngrules.verification.prove import prove_rule

    verdict = prove_rule(rule)
    assert verdict.status == "proved" and "IEEE float16" in verdict.reason, str(verdict)
    assert "every shape" in verdict.reason
