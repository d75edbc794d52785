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


def test_a_constant_tied_to_a_lets_size_is_built_to_satisfy_it():
    from ngrules.verification.instances.hints import guard_hints

    rule = ng.load_library().rule("layer_norm_bprop")
    hints = guard_hints(rule)
    assert "s.reduction_axes" in repr(hints.values["count"]).replace("EAttr(obj=EVar(name='s'), "
                                                                     "name='reduction_axes')",
                                                                     "s.reduction_axes")
    assert any("reduction_axes" in repr(e) for e in hints.equations["gamma"])


def test_a_float_divided_by_zero_in_a_rule_is_ieee_and_an_integer_one_an_error():
    from ngrules.lang.bounds import divide

    assert divide(1, 0.0) == float("inf") and divide(-1.0, 0) == float("-inf")
    assert divide(1, -0.0) == float("-inf") and divide(0.0, 0.0) != divide(0.0, 0.0)  # NaN
    with pytest.raises(ZeroDivisionError):
        divide(3, 0)
    rules = ng.parse_rules("pass p\nrule d: x / (c: Constant) if c.rank == 0 "
                           "=> x * (1 / value(c))\n")
    assert verify(rules, EXAMPLES)["d"].status == "verified"  # c = 0: inf on both sides


RANGE = """
pass p
rule log_power:
    Log(Power(a, b))
    assume a > 0
    => b * Log(a)
"""


def test_an_intermediate_out_of_float_range_is_not_a_wrong_rule():
    # a = 5e-324: Power underflows to 0 and Log gives -inf; b = inf: 1^inf is 1, inf·log 1 NaN
    verdict = verify(ng.parse_rules(RANGE), EXAMPLES, floats="reals")["log_power"]
    assert verdict.status == "verified", str(verdict)  # in IEEE, -inf before is a difference


def test_verify_a_file_verifies_the_rules_it_defines_and_with_imports_those_it_imports(
        tmp_path, capsys):
    from ngrules.cli.main import main

    path = tmp_path / "mine.rules"
    path.write_text('import "ngrules:relu.rules"\npass mine\nrule mine_neg: -(-x) => x\n')
    assert main(["verify", str(path), "--examples", "5"]) == 0
    out = capsys.readouterr().out
    assert "mine_neg" in out and "relu_fprop" not in out and "1 verified of 1 rules" in out
    assert main(["verify", str(path), "--examples", "5", "--with-imports"]) == 0
    out = capsys.readouterr().out
    assert "mine_neg" in out and "relu_fprop" in out and "relu_bprop" in out
