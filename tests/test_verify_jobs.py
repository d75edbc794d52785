"""`verify(..., jobs=N)`: rules judged in forked workers keep the rules' order, each with its
verdict and figures, a wrong rule's counterexample printed as in one process."""

from __future__ import annotations

import ngrules as ng
from ngrules.verification.verify import verify

RULES = """
pass p
rule off: x * 2 => x + 1
rule one: x * 1 => x
"""


def test_workers_give_each_rule_its_verdict_in_order():
    shared = verify(ng.parse_rules(RULES, "j.rules"), 3, jobs=2)
    assert [(v.rule.name, v.status) for v in shared] == [("off", "wrong"), ("one", "verified")]
    assert shared["off"].failed and not shared.ok and shared["one"].examples >= 3
    assert "counterexample" in str(shared["off"]) and "j.rules:3" in str(shared["off"])
    assert "examples fired" in shared["one"].headline
