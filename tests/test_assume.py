"""`assume` clauses: parsed, formatted, checked into ranges; ignored by the engine; honoured by
verification (values drawn within the range, the verdict says so) and by the prover."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

import ngrules as ng
from ngrules.errors import RuleErrors
from ngrules.lang.assumptions import Assumption
from ngrules.lang.layout import format_rules
from ngrules.lang.library import library_path
from ngrules.lang.parser import parse
from ngrules.lang.syntax import Assume
from ngrules.verification.instances import attempts
from ngrules.verification.instances.assumed import confine
from ngrules.verification.instances.sampling import Instance
from ngrules.verification.verify import verify_rule

RELU_AS_IDENTITY = "rule r:\n    Maximum(x, 0)\n    assume x >= 0\n    => x\n"


def rule_of(text: str):
    return ng.parse_rules(text, "t.rules").rules[0]


# -- language ---------------------------------------------------------------------------------
def test_an_assume_clause_parses_formats_and_round_trips():
    text = ("rule r:\n    Maximum(x, 0)\n    assume -30 <= x and x <= 30\n    if x.rank == 0\n"
            "    => x\n")
    f = parse(text, "t.rules")
    [clause] = [c for c in f.decls[0].clauses if isinstance(c, Assume)]
    assert (clause.span.line, clause.span.col) == (3, 5)
    assert format_rules(f) == text
    assert parse(format_rules(f), "t.rules") == f


def test_assume_is_a_reserved_word():
    with pytest.raises(ng.NgrulesError, match="keyword 'assume'"):
        parse("rule r: Exp(assume) => assume", "t.rules")


@pytest.mark.parametrize(
    ("clause", "expected"),
    [
        ("assume x <= 30", [Assumption("x", high=30)]),
        ("assume -30 <= x and x <= 30", [Assumption("x", -30, 30)]),
        ("assume 0 < x", [Assumption("x", low=0, low_open=True)]),
        ("assume abs(x) < 2", [Assumption("x", -2, 2, True, True)]),
        ("assume x >= -1 and y < 4\n    assume x <= 3", [Assumption("x", -1, 3),
                                                          Assumption("y", high=4, high_open=True)]),
        ("assume x <= 5 and x < 5", [Assumption("x", high=5, high_open=True)]),
    ],
)
def test_the_checker_reads_assumptions_into_one_range_per_variable(clause, expected):
    rule = rule_of(f"rule r:\n    Maximum(x, y)\n    {clause}\n    => x\n")
    assert list(rule.assumptions) == expected
    assert rule.clauses == ()  # not a guard: the engine never sees it


def test_assumptions_read_as_written_in_verdicts():
    texts = [str(Assumption("x", high=30)), str(Assumption("x", -2.5, 2, True, False)),
             str(Assumption("x", low=0, low_open=True))]
    assert texts == ["x <= 30", "-2.5 < x <= 2", "x > 0"]


@pytest.mark.parametrize(
    ("clause", "col", "message"),
    [
        ("assume z <= 3", 12, "variable 'z' is never bound by the pattern"),
        ("let k = 2\n    assume k <= 3", 12, "'k' is a let value"),
        ("assume x <= y", 12, "an assumption compares a pattern variable with a number"),
        ("assume x <= y.rank", 12, "an assumption compares a pattern variable with a number"),
        ("assume x == 3", 12, "an assumption compares a pattern variable with a number"),
        ("assume x <= 3 or x >= 4", 12, "an assumption compares a pattern variable"),
        ("assume x", 12, "an assumption compares a pattern variable with a number"),
        ("assume abs(x) >= 2", 12, "is not one range"),
        ("assume _ <= 2", 12, "'_' is a wildcard"),
        ("assume x >= 5 and x <= 3", 23, "assumptions on 'x' admit no value (x >= 5 and x <= 3)"),
        ("assume abs(x) <= -1", 12, "admit no value"),
        ("assume x < 2 and x > 2", 22, "admit no value"),
    ],
)
def test_a_bad_assumption_is_a_located_error(clause, col, message):
    text = f"rule r:\n    Maximum(x, y)\n    {clause}\n    => x\n"
    with pytest.raises(RuleErrors) as info:
        ng.parse_rules(text, "t.rules")
    [error] = info.value.errors
    line = 3 + clause.count("\n")
    assert message in error.message
    assert (error.span.file, error.span.line, error.span.col) == ("t.rules", line, col)
    assert f"t.rules:{line}:{col}: error: " in str(info.value) and "^" in str(info.value)


# -- engine -----------------------------------------------------------------------------------
def test_the_engine_does_not_check_an_assumption():
    x = ng.placeholder([], np.float64, name="x")
    graph = ng.maximum(x, ng.constant(0.0, [], np.float64))
    res = ng.rewrite([graph], ng.parse_rules(RELU_AS_IDENTITY, "t.rules"))
    assert res.fired() == {"r": 1} and res.outputs == [x]
    assert ng.execute(res.outputs, {x: np.array(-3.0)})[0] == -3.0  # the author's promise broken


# -- verification -----------------------------------------------------------------------------
def test_a_rule_wrong_outside_its_assumption_is_verified_under_it():
    without = verify_rule(rule_of("rule r: Maximum(x, 0) => x"), 15)
    assert without.status == "wrong"
    assert without.counterexample.feeds and min(v.min() for v in without.counterexample.feeds
                                                 .values()) < 0
    under = verify_rule(rule_of(RELU_AS_IDENTITY), 15)
    assert under.status == "verified", str(under)
    assert under.headline.endswith("15 examples fired, assuming x >= 0; also run in float32, "
                                   "float16; 150 layouts tried for ill-formedness (bound 150)")


def test_a_rule_wrong_inside_its_assumption_is_still_wrong_there():
    v = verify_rule(rule_of(RELU_AS_IDENTITY.replace("x >= 0", "x >= -1")), 15)
    assert v.status == "wrong" and ", assuming x >= -1" in v.headline
    values = np.concatenate([np.ravel(a) for a in v.counterexample.feeds.values()])
    assert values.min() >= -1 and values.min() < 0


def _drawn(rule, name: str, n: int = 150) -> np.ndarray:
    seen = []

    @settings(max_examples=n, database=None, deadline=None, derandomize=True)
    @given(attempts(rule))
    def collect(attempt):
        if isinstance(attempt, Instance):
            seen.extend(np.ravel(v) for k, v in attempt.feeds.items() if k.name == name)

    collect()
    return np.concatenate(seen)


def test_values_of_an_assumed_variable_are_drawn_within_its_range_edges_included():
    values = _drawn(rule_of("rule r:\n    Log(x) + y\n    assume x < 3 and -2 <= x\n    => x"),
                    "x")
    assert values.min() >= -2 and values.max() < 3
    assert (values == -2).any() and (values == np.nextafter(3.0, 0)).any()  # the ends are tried
    assert (values > 0).mean() > 0.6  # mostly in Log's domain, sometimes outside it


def test_confined_values_stay_in_the_range_in_a_narrower_dtype():
    rng = np.random.default_rng(0)
    a = Assumption("x", high=0.1, high_open=True)
    v = confine(np.full(1000, 7.0), rng, a, "positive", np.float32).astype(np.float32)
    assert a.admits(v) and (v > 0).all()
    assert not a.admits(np.array([0.1, -1.0]))


def test_an_assumption_on_a_named_sub_pattern_keeps_the_instances_that_satisfy_it():
    text = "rule r:\n    Maximum(y @ Sigmoid(x), 0.5)\n    assume y >= 0.5\n    => y\n"
    assert verify_rule(rule_of(text.replace("    assume y >= 0.5\n", "")), 15).status == "wrong"
    v = verify_rule(rule_of(text), 15)
    assert v.status == "verified", str(v)
    assert "assuming y >= 0.5" in v.headline


def _shipped_rule(name: str):
    """One rule of the shipped nn.rules, parsed alone (loading the whole file would declare its
    ops in the op table for the rest of the session)."""
    text = (library_path() / "nn.rules").read_text()
    start = text.index(f"rule {name}:")
    return rule_of(text[start : text.index("\n\n", start)])


def test_the_nn_cross_entropy_rule_holds_on_its_assumed_range_and_not_beyond():
    rule = _shipped_rule("cross_entropy_binary_sigmoid")
    [a] = rule.assumptions
    assert (a.name, a.low, a.high) == ("x", -15, 25)
    axis = ng.make_axis(2001, "n")
    x, t = (ng.placeholder([axis], np.float64, name=n) for n in "xt")
    e, low, one = (ng.constant(v, [], np.float64) for v in (math.exp(-50), -50.0, 1.0))
    safelog = lambda v: ng.maximum(ng.log(v + e), low)  # noqa: E731
    y = ng.sigmoid(x)
    before = -(safelog(y) * t + safelog(one - y) * (one - t))
    res = ng.rewrite([before], rule)
    assert res.fired() == {"cross_entropy_binary_sigmoid": 1}
    for tv in (0.0, 1e-7, 0.5, 2.0, -1e6):
        feeds = {x: np.linspace(-15, 25, 2001), t: np.full(2001, tv)}
        [b], [r] = ng.execute([before], feeds), ng.execute(res.outputs, feeds)
        np.testing.assert_allclose(r, b, rtol=1e-6, atol=1e-9)
    for outside in (-25.0, 30.0):  # the promise is needed on both sides
        feeds = {x: np.full(2001, outside), t: np.full(2001, 0.0)}
        [b], [r] = ng.execute([before], feeds), ng.execute(res.outputs, feeds)
        assert not np.allclose(r, b, rtol=1e-6, atol=1e-9)


# -- the prover -------------------------------------------------------------------------------
def test_the_prover_proves_under_the_assumption_and_finds_counterexamples_within_it():
    pytest.importorskip("z3")
    from ngrules.verification.prove import prove_rule

    assert prove_rule(rule_of("rule r: Maximum(x, 0) => x")).status == "wrong"
    proved = prove_rule(rule_of(RELU_AS_IDENTITY))
    assert proved.status == "proved", str(proved)
    assert proved.headline.endswith("assuming x >= 0")
    wrong = prove_rule(rule_of(RELU_AS_IDENTITY.replace("x >= 0", "x > -0.5")))
    assert wrong.status == "wrong"
    values = np.concatenate([np.ravel(a) for a in wrong.counterexample.feeds.values()])
    assert -0.5 < values.min() < 0


def test_the_prover_honours_an_assumption_on_a_computed_node():
    pytest.importorskip("z3")
    from ngrules.verification.prove import prove_rule

    text = "rule r:\n    Maximum(x, 0) + Maximum(y, 0)\n    where y = Negative(x)\n    => x\n"
    assert prove_rule(rule_of(text)).status == "wrong"
    proved = prove_rule(rule_of(text.replace("    =>", "    assume y <= 0\n    =>")))
    # Add rounds in floats: proved over the reals (issue 22), unless proved in IEEE floats
    assert proved.status in ("proved", "proved-reals"), str(proved)


# -- the language server ------------------------------------------------------------------------
def test_the_language_server_explains_assume_and_locates_its_errors():
    from ngrules.lsp.analysis import Document

    text = "rule r:\n    Maximum(x, 0)\n    assume x >= 0 and w <= 1\n    => x\n"
    doc = Document(text, "t.rules")
    [problem] = doc.diagnostics()
    assert "'w' is never bound" in problem.message
    assert (problem.place.line, problem.place.col) == (2, 22)
    assert "not checked when rules rewrite" in doc.hover(2, 6).lower()
    assert "pattern variable" in doc.hover(2, 11)  # x, bound by the pattern
    assert ("assume", "keyword", "") in doc.completions(2, 7)
