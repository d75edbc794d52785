"""Passes that cannot match are not walked (`engine.presence`), and count as if they were."""

from unittest.mock import patch

import numpy as np
from helpers import expressions
from hypothesis import given
from hypothesis import strategies as st

import ngrules as ng
from ngrules.engine import driver

RULES = """
pass absent
rule exp_log: Exp(Log(x)) => x
rule neg_tanh: Negative(Tanh(x)) => x
rule pair: e @ Exp(x), l @ Log(e) => (Negative(x), Tanh(x))
rule opt_root: Negative?(Exp(l: Log)) => Exp(l)
pass present
rule exp_neg: Exp(Negative(x)) => Reciprocal(Exp(x))
"""


def _walked(monkeypatch) -> list[str]:
    names: list[str] = []
    walk = driver._Pass.walk

    def counted(self, outputs, census=None):
        names.append(self.name)
        return walk(self, outputs, census)

    monkeypatch.setattr(driver._Pass, "walk", counted)
    return names


def test_a_pass_whose_rules_name_an_absent_op_counts_as_walked_without_walking(monkeypatch):
    x = ng.placeholder({"A": 3}, np.float64, name="x")
    graph = [ng.exp(x) * ng.exp(-x) + ng.exp(x)]
    rules = ng.parse_rules(RULES)
    walked = _walked(monkeypatch)
    untimed = ng.rewrite(graph, rules, passes=["absent", "present"])
    assert walked == ["present"]  # Log and Tanh are nowhere: `absent` cannot match
    del walked[:]
    timed = ng.rewrite(graph, rules, passes=["absent", "present"], stats=True)  # walks all
    assert walked == ["absent", "present"]
    assert untimed.outputs == timed.outputs and untimed.fired() == {"exp_neg": 1}
    assert untimed.rounds == timed.rounds == 1  # the multi-root round of `absent`
    for name in ("exp_log", "neg_tanh", "pair", "opt_root", "exp_neg"):
        a, b = untimed.stats[name], timed.stats[name]
        assert (a.attempts, a.matches) == (b.attempts, b.matches), name
    assert untimed.stats["exp_log"].attempts == 2  # two Exp nodes: exp(x) is one node
    assert untimed.stats["neg_tanh"].attempts == 1
    assert untimed.stats["opt_root"].attempts == 3  # at each Negative and each Exp node


def test_an_optional_op_or_an_op_kind_absent_from_the_graph_does_not_skip(monkeypatch):
    x = ng.placeholder({"A": 3}, np.float64, name="x")
    rules = ng.parse_rules("""
    pass optional
    rule exp_of_broadcast: Exp(Broadcast?(Negative(x))) => Reciprocal(Exp(x))
    pass kind
    rule tanh_of_log: Tanh(l: Log) => l
    """)
    walked = _walked(monkeypatch)
    res = ng.rewrite([ng.exp(-x)], rules, passes=["optional", "kind"])
    assert res.fired() == {"exp_of_broadcast": 1} and walked == ["optional"]
    del walked[:]
    res = ng.rewrite([ng.tanh(ng.log(x))], rules, passes=["kind"])
    assert res.fired() == {"tanh_of_log": 1} and walked == ["kind"]


#: Rules over the ops of `helpers.expressions` (Add, Multiply, Subtract, Negative, Exp) and
#: ops its graphs never have (Log, Tanh): one-root, optional (an absent op around a present
#: pattern too), typed by an op or a trait, and multi-root.
POOL = [
    "rule neg_neg: Negative(Negative(x)) => x",
    "rule exp_neg: Exp(Negative(x)) => Reciprocal(Exp(x))",
    "rule sub_self: Subtract(x, x) => Multiply(x, 0)",
    "rule exp_log: Exp(Log(x)) => x",
    "rule opt_log: Exp(Negative?(l: Log)) => l",
    "rule tanh_kind: Negative(t: Tanh) => t",
    "rule opt_tanh: Exp(Tanh?(Negative(x))) => Reciprocal(Exp(x))",
    "rule leaf_kind: Negative(l: leaf) => Exp(l)",
    "rule pair_absent: e @ Exp(x), l @ Log(e) => (Negative(x), Tanh(x))",
    "rule pair_present: e @ Exp(x), n @ Negative(e) => (Exp(x), Reciprocal(e))",
    "rule opt_root: Negative?(Exp(l: Log)) => Exp(l)",  # tried at Negative and Exp nodes
    "rule leaf_log: v: leaf, l @ Log(v) => (v, Exp(l))",  # tried at every node
]


@st.composite
def _passes(draw) -> str:
    chosen = draw(st.lists(st.lists(st.sampled_from(POOL), min_size=1, max_size=3,
                                    unique=True), min_size=1, max_size=4))
    return "\n".join(f"pass p{i}\n" + "\n".join(r.replace("rule ", f"rule p{i}_", 1)
                                                for r in rules)
                     for i, rules in enumerate(chosen))


_LEAVES = [ng.placeholder({"A": 2}, np.float64, name=n) for n in ("p", "q")]


@given(graph=expressions(_LEAVES, depth=4, stop_odds=4), text=_passes(),
       fuel=st.sampled_from([None, 1, 2, 5]))
def test_skipping_by_presence_changes_neither_the_result_nor_the_stats(graph, text, fuel):
    rules = ng.parse_rules(text)
    skipping = ng.rewrite([graph], rules, fuel=fuel)
    with patch.object(driver, "skipped", lambda one, census: False):  # every pass walked
        walking = ng.rewrite([graph], rules, fuel=fuel)
    assert skipping.outputs == walking.outputs
    assert skipping.fired() == walking.fired() and skipping.rounds == walking.rounds
    assert skipping.stats.keys() == walking.stats.keys()
    for name, a in skipping.stats.items():
        b = walking.stats[name]
        assert (a.attempts, a.matches, a.failures) == (b.attempts, b.matches, b.failures), name
