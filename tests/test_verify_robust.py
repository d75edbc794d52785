"""Verification never crashes: integer, bool and mixed-dtype rules get verdicts, a rule with no
buildable instance is `unverified` with its reason, and one rule's failure is its own verdict,
never the end of the others'."""

from __future__ import annotations

import pytest

import ngrules as ng
from ngrules.verification import verify as verify_module
from ngrules.verification.verify import verify

EXAMPLES = 10

DTYPES = """
pass dtypes
rule int_add_zero:  m @ x + 0 if x.dtype == "int32" and m.dtype == "int32" => x
rule bool_select:   Select(c, x, x) => x
rule int_greater:   Greater(x, y) if x.dtype == "int32" => Less(y, x)
"""


def test_integer_bool_and_mixed_rules_get_verdicts():
    report = verify(ng.parse_rules(DTYPES), EXAMPLES)
    assert [v.status for v in report] == ["verified"] * 3, str(report)


def test_one_rules_failure_is_its_own_verdict(monkeypatch):
    rules = ng.parse_rules("pass p\nrule a: -(-x) => x\nrule b: x * 1 => x\n")
    real = verify_module._one

    def broken(rule, *args):
        if rule.name == "a":
            raise RuntimeError("the verifier broke")
        return real(rule, *args)

    monkeypatch.setattr(verify_module, "_one", broken)
    report = verify(rules, EXAMPLES)
    assert report["a"].status == "unverified"
    assert "the verifier broke" in report["a"].reason
    assert report["b"].status == "verified"


def test_no_buildable_instance_is_unverified_with_a_reason(monkeypatch):
    pytest.importorskip("z3")
    from hypothesis import strategies as st

    import ngrules.verification.instances as instances
    from ngrules.verification.prove import prover

    rule = ng.parse_rules("pass p\nrule a: -(-x) => x\n").rule("a")
    monkeypatch.setattr(instances, "attempts", lambda rule, earlier=(): st.nothing())
    verdict = prover.prove_rule(rule)
    assert verdict.status == "unverified"
    assert "no instance" in verdict.reason
