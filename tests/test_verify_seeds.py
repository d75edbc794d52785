"""Verdicts do not depend on the seed's luck or the machine's load: under a derandomized
profile every draw of the verifier repeats (instances, special values, narrow dtypes), a seed
given repeats them in any profile, and the special values stop after a count, not a time."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import settings

import ngrules as ng
from ngrules.cli.main import main
from ngrules.ir.graph import toposort
from ngrules.verification import special
from ngrules.verification import verify as verifying
from ngrules.verification.verdicts import VerificationReport
from ngrules.verification.verify import verify_rule


def _rule(text: str):
    return ng.parse_rules(f"pass p\nrule r: {text}", "t.rules").rules[0]


def _digest(instances) -> str:
    h = hashlib.sha1()
    for inst in instances:
        h.update(repr([(n.op, n.axes.lengths) for n in toposort(inst.outputs)]).encode())
        for _, value in sorted(inst.feeds.items(), key=lambda kv: kv[0].name):
            h.update(np.asarray(value).tobytes())
    return h.hexdigest()


def _special_instances(monkeypatch, rule, runs: int = 2, **kw) -> list[str]:
    seen = []
    real = verifying.special_counterexample

    def spy(kept, *args, **kwargs):
        seen.append(_digest(kept))
        return real(kept, *args, **kwargs)

    monkeypatch.setattr(verifying, "special_counterexample", spy)
    for _ in range(runs):
        verify_rule(rule, 3, **kw)
    return seen


def test_the_special_values_see_the_same_instances_on_every_run(monkeypatch):
    real = verifying._settings  # a derandomized profile, as `ci` (whichever runs the tests)
    monkeypatch.setattr(verifying, "_settings", lambda n: settings(real(n), derandomize=True))
    first, second = _special_instances(monkeypatch, _rule("Log(Exp(a) / d) => a - Log(d)"))
    assert first == second


def test_a_seed_repeats_every_draw_and_another_seed_draws_others(monkeypatch):
    rule = _rule("x * y if size(x) > 2 => y * x")
    seeded = _special_instances(monkeypatch, rule, seed=12345)
    assert seeded[0] == seeded[1]
    (other,) = _special_instances(monkeypatch, rule, runs=1, seed=54321)
    assert other != seeded[0]


def test_the_special_values_stop_after_a_count_of_comparisons(monkeypatch):
    compared = []
    real = special.compare
    monkeypatch.setattr(special, "compare", lambda *a, **k: compared.append(1) or real(*a, **k))
    monkeypatch.setattr(special, "MAX_COMPARED", 5)
    verdict = verify_rule(_rule("Log(Exp(a)) assume reals => a"), 4)  # IEEE: Exp(1e3) is inf
    assert verdict.status == "verified" and len(compared) == 5
    assert special.BUDGET >= 30  # wall time is a safety net only, far above what a rule takes


def test_a_report_names_its_seed_and_the_cli_takes_one(tmp_path, capsys):
    assert "--seed 7 repeats it" in VerificationReport(seed=7).summary()
    assert "seed" not in VerificationReport().summary()  # derandomized: nothing to repeat
    path = tmp_path / "t.rules"
    path.write_text("pass p\nrule r: x * 1 => x\n")
    assert main(["verify", str(path), "--examples", "2", "--seed", "7"]) == 0
    assert "(seed 7: --seed 7 repeats it)" in capsys.readouterr().out


def test_an_ill_formed_layout_is_found_whatever_the_seed():
    """`a - Broadcast?(c) => a + -c` breaks only when an unbroadcast `c` of `a`'s rank is laid
    out in another order. Under these seeds the eight instances kept for the layout check were
    all of other shapes, or the budget of 150 layouts went to the small ones first: the rule
    came back verified (4 of 32 seeds with one fix, 6 with the other, 8 with neither)."""
    rule = _rule("a - Broadcast?(c: Constant) => a + -c")
    for seed in (12, 22, 24, 40):
        verdict = verify_rule(rule, seed=seed)
        assert verdict.status == "ill-formed", (seed, verdict.status)
