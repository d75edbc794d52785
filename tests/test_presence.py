"""Passes that cannot match are not walked (`engine.presence`), and count as if they were."""

import numpy as np

import ngrules as ng
from ngrules.engine import driver

RULES = """
pass absent
rule exp_log: Exp(Log(x)) => x
rule neg_tanh: Negative(Tanh(x)) => x
rule pair: e @ Exp(x), l @ Log(e) => (Negative(x), Tanh(x))
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
    for name in ("exp_log", "neg_tanh", "pair", "exp_neg"):
        a, b = untimed.stats[name], timed.stats[name]
        assert (a.attempts, a.matches) == (b.attempts, b.matches), name
    assert untimed.stats["exp_log"].attempts == 2  # two Exp nodes: exp(x) is one node
    assert untimed.stats["neg_tanh"].attempts == 1


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
