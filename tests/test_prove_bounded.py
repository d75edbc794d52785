"""Issue 35 item 1: where no proof for every shape exists, a bounded proof enumerates every
shape within its bound (never a sample), says its bound (`proved for ranks <= R and lengths
<= L`, the status `proved-bounded`, distinct from `proved`), and never replaces testing: the
wrong rules right up to the bound come back wrong from the testing beyond it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import ngrules as ng
from ngrules.verification.verdicts import Verdict, with_proof

pytest.importorskip("z3")

from ngrules.verification.prove import prove_rule  # noqa: E402
from ngrules.verification.prove.bounded import graphs  # noqa: E402

TRAPS = Path(__file__).parent / "corpus" / "wrong" / "class15_bounded_proofs.rules"
TWICE = "pass p\nrule tt: Transpose(Transpose(x)) => x\n"


def _rule(text: str, name: str):
    return ng.parse_rules(text, "t.rules").rule(name)


def _trap(name: str):
    return ng.load_rules(TRAPS).rule(name)


def _leaves_per_axis(inst) -> tuple:
    (x,) = [n for n in inst.outputs[0].args[0].args]
    return tuple(len(a.leaves()) for a in x.axes)


def test_the_enumeration_counts_every_shape_of_a_small_pattern():
    # Transpose(Transpose(x)): x of r axes of lengths 1..L, each run of axes flattened or not.
    # Ranks <= 2, lengths <= 3: 1 (rank 0) + 3 + 9 (two axes) + 9 (the two flattened) = 22.
    found, _ = graphs(_rule(TWICE, "tt"), rank=2, length=3)
    shapes = Counter(_leaves_per_axis(i) for i in found)
    assert shapes == {(): 1, (1,): 3, (1, 1): 9, (2,): 9}
    assert len(found) == 22
    # ranks <= 3: + 27 (three axes) and 27 for each of (ab)c, a(bc), (abc): 130 in all
    found, _ = graphs(_rule(TWICE, "tt"), rank=3, length=3)
    assert len(found) == 130
    assert Counter(_leaves_per_axis(i) for i in found)[(1, 2)] == 27


def test_a_true_rule_outside_the_every_shape_fragment_is_proved_within_its_bound():
    v = prove_rule(_rule(TWICE, "tt"), bound=2, rank=2)
    assert v.status == "proved-bounded", str(v)
    assert "proved for ranks <= 2 and lengths <= 2" in v.headline
    assert v.headline.startswith("proved/bound") and "11 graphs of the pattern" in v.headline
    assert (v.rank, v.bound) == (2, 2)


def test_typed_constants_are_proved_for_every_value():
    # true for every c: proved within the bound with c's elements as variables
    text = "pass p\nrule tc: Transpose(x) * Transpose(c: Constant) => Transpose(x * c)\n"
    v = prove_rule(_rule(text, "tc"), bound=2, rank=2)
    assert v.status == "proved-bounded", str(v)
    # true only where c is 3.375 (the value the enumeration gives c): no bounded proof (and
    # the drawn instances show it wrong)
    from ngrules.verification.prove import prover
    from ngrules.verification.prove.budget import Budget
    from ngrules.verification.prove.within import prove_within

    text = "pass p\nrule tm: Transpose(x) * Transpose(c: Constant) => Transpose(x) * 3.375\n"
    verdict = Verdict(_rule(text, "tm"), "unverified")
    why = prove_within(verdict, "strict", Budget().start(), 2, 2, prover)
    assert verdict.status == "unverified" and "a typed constant" in why, why
    assert prove_rule(_rule(text, "tm"), bound=2, rank=2).status == "wrong"


# the traps right up to the bound, wrong beyond it (a transpose, a sum from rank 4): tested
# in tests/test_prove_shapes.py::test_verify_with_prove_reports_the_failure_testing_finds


def test_max_of_a_scaled_tensor_is_wrong():
    v = prove_rule(_trap("max_of_scaled"), bound=2, rank=2)
    assert v.status == "wrong", str(v)


def _proof(rule) -> Verdict:
    return Verdict(rule, "proved-bounded", reason="(...)", bound=3, rank=3)


def test_a_bounded_proof_never_replaces_testing():
    rule = _rule(TWICE, "tt")
    wrong = Verdict(rule, "wrong")
    assert with_proof(_proof(rule), lambda: wrong, "ieee") is wrong
    assert "z3 proved for ranks <= 3 and lengths <= 3" in wrong.note
    unverified = Verdict(rule, "unverified", reason="the rule did not fire")
    got = with_proof(_proof(rule), lambda: unverified, "ieee")
    assert got is unverified and "did not confirm it" in got.note
    got = with_proof(_proof(rule), lambda: Verdict(rule, "verified", examples=40), "ieee")
    assert got.status == "proved-bounded" and got.ok
    assert got.headline.endswith("(...); and tested: 40 examples fired")


def test_the_cache_and_the_hover_keep_a_bounded_verdict_apart_from_proved(tmp_path):
    from ngrules.lsp.verdicts import last_verdict
    from ngrules.verification.cache import Cache

    rules = ng.parse_rules(TWICE, "t.rules")
    rule = rules.rule("tt")
    Cache({"prove": True}).store(_proof(rule), [])
    got = Cache({"prove": True}).lookup(rule, [])
    assert got.status == "proved-bounded" and (got.rank, got.bound) == (3, 3)
    hover = last_verdict(TWICE, "t.rules", "tt")
    assert hover.startswith("proved/bound") and "proved for ranks <= 3 and lengths <= 3" in hover


def test_the_command_line_takes_the_bound(tmp_path, capsys):
    from ngrules.cli.main import main

    path = tmp_path / "t.rules"
    path.write_text(TWICE)
    code = main(["verify", str(path), "--prove", "--prove-rank", "2", "--prove-length", "2",
                 "--examples", "5"])
    out = capsys.readouterr().out
    assert code == 0 and "proved/bound" in out, out
    assert "proved for ranks <= 2 and lengths <= 2" in out and "1 proved-bounded" in out


def test_no_bounded_proof_where_the_enumeration_is_not_exhaustive(monkeypatch):
    from ngrules.verification.prove import bounded

    # an attribute drawn from the op's generator (a Relu's slope) would be a sample
    text = "pass p\nrule rt: Relu(Transpose(x)) => Transpose(Relu(x))\n"
    with pytest.raises(bounded.Unbounded, match="Relu takes attributes from its generator"):
        graphs(_rule(text, "rt"), rank=1, length=1)
    # more graphs than the cap: refused, never a partial proof
    monkeypatch.setattr(bounded, "MAX_BUILDS", 50)
    with pytest.raises(bounded.Unbounded, match="more than 50 graphs within the bound"):
        graphs(_trap("max_of_sum"))
    v = prove_rule(_trap("max_of_sum"))  # the rule is wrong: found so, or left unproved
    assert v.status in ("unverified", "wrong"), str(v)
    assert v.status == "wrong" or "more than 50 graphs" in v.reason, str(v)
