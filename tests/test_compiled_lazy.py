"""A compiled rule generates only what is used (issue 34, item 6): a walk's dispatch pastes a
rule's matcher and clauses into its own code, so the rule's own matchers, clause function and
fused matcher are generated at their first use, not for every rule of every pass."""

from ngrules.engine import driver
from ngrules.engine.compiled import CompiledRule
from ngrules.engine.driver import rewrite
from ngrules.ir import frontend as F
from ngrules.ir.axes import make_axis
from ngrules.lang.library import load_library
from ngrules.lang.loader import parse_rules

RULES = """pass p
rule mul_one: x * c if is_constant(c) and value(c) == 1 => x
rule twice: x + x => x * 2.0
"""


def test_compiling_generates_no_matcher_and_a_rewrite_no_fused_matcher():
    rules = parse_rules(RULES)
    x = F.placeholder([make_axis(4, "N")], name="x")
    out = F.multiply(F.add(x, x), F.constant(1.0))
    compiled = [CompiledRule(r) for r in rules]
    for c in compiled:
        assert not {"_roots", "_generated", "fused", "_match", "_needs_nodes"} & set(vars(c))
    result = rewrite([out], rules)
    (node,) = result.outputs
    assert node.op == "Multiply" and node.args[0] is x  # (x + x) * 1 -> x * 2.0
    assert [f.rule for f in result.trace] == ["twice", "mul_one"]
    for rule in rules:  # the driver's compiled rules: the dispatch pasted their code
        assert not {"_roots", "_generated", "fused"} & set(vars(driver._compile(rule)))


def test_fusable_says_whether_the_fused_matcher_is_generated():
    rules = [*load_library(), *parse_rules(RULES)]
    decided = [(c.fusable, c.fused is not None) for c in map(CompiledRule, rules)]
    assert all(a == b for a, b in decided)
    assert {a for a, _ in decided} == {True, False}


def test_a_lazy_matcher_still_matches_through_apply():
    rules = parse_rules(RULES)
    x = F.placeholder([make_axis(4, "N")], name="x")
    c = CompiledRule(rules.rule("twice"))
    found = c.apply(F.add(x, x))
    assert found is not None and found[1][0].op == "Multiply"
    assert c.apply(F.add(x, F.constant(1.0))) is None


def test_a_rule_whose_clauses_cannot_be_generated_is_applied_unpasted(monkeypatch):
    """A function gone from the library after the check: the dispatch does not paste the
    rule (its fused matcher would be None), the rule is tried through `apply`, and the other
    rules of the pass still fire."""
    from ngrules.lang.functions import FUNCTIONS

    monkeypatch.setitem(FUNCTIONS, "gone", FUNCTIONS["len"])
    rules = parse_rules("pass p\nrule odd: x * c if gone(x.axes) == 9 => x\n"
                        "rule twice: x + x => x * 2.0\n")
    del FUNCTIONS["gone"]
    c = CompiledRule(rules.rule("odd"))
    assert not c.fusable and c.fused is None
    x = F.placeholder([make_axis(4, "N")], name="x")
    result = rewrite([F.multiply(F.add(x, x), F.constant(1.0))], rules)
    assert [f.rule for f in result.trace] == ["twice"]
    assert result.stats["odd"].attempts >= 1


def test_a_walk_generates_the_dispatch_of_the_ops_it_meets_only(monkeypatch):
    from ngrules.engine import dispatch

    generated = []
    real = dispatch._generate
    monkeypatch.setattr(dispatch, "_generate",
                        lambda rules, on_view: generated.append(rules) or real(rules, on_view))
    rules = parse_rules("pass p\nrule a: x + 0.0 => x\nrule b: x / 1.0 => x\n"
                        "rule c: Exp(Log(x)) => x\n")
    x = F.placeholder([make_axis(4, "N")], name="x")
    result = rewrite([F.add(x, F.constant(0.0))], rules)
    assert result.outputs == [x]
    assert {r.name for rs in generated for r in rs} == {"a"}  # no Divide, Exp in the graph
