"""Instances of a rule's pattern: they match it, cover its variants, and respect op domains."""

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

import ngrules as ng
from ngrules.lang.expr import evaluate
from ngrules.lang.kinds import is_constant
from ngrules.lang.syntax import PVar
from ngrules.verification.instances import (
    Builder,
    Instance,
    argument_domain,
    as_float64,
    attempts,
    constraints,
    guard_hints,
    instances,
)

QUIET = settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
FIND = settings(QUIET, phases=[Phase.generate], max_examples=300)  # the first hit, unshrunk


def rule(text: str) -> ng.Rule:
    return ng.parse_rules(text, "inst.rules").rules[0]


def first(text: str, condition):
    """An instance of the rule's pattern satisfying condition (find fails if none exists)."""
    return find(instances(rule(text)), condition, settings=FIND)


PATTERNS = [
    "rule r: x * 1 => x",
    "rule r: Log(Exp(a)) => a",
    "rule r: d @ Dot(x, y) if len(d.reduction_axes) == 0 => d * 1",
    "rule r: s @ Sum(Broadcast?(c: constant)) => s * 1",
    "rule r: Add(h, h) where h = Exp(x) => h * 2",
    "rule r: r @ ReorderAxes(Transpose(x: Unflatten)) => r * 1",
    "rule r: Sum(e: elementwise) * y => y",
    "rule r: u @ Unflatten(Flatten(x)) => u * 1",
    "rule r: DotLowDimension(x, y) => x",
    "rule r: Output(b: BatchnormFprop) => b",
    # a replacement that does not match again: `=> (s, d)` ran each instance's rewrite to fuel
    "rule r: s @ Exp(x) * Exp(y), d @ Exp(x) / Exp(y) => (Exp(x + y), Exp(x - y))",
]


@pytest.mark.parametrize("text", PATTERNS)
def test_instances_match_their_pattern_and_are_valid_graphs(text):
    @QUIET
    @given(instances(rule(text)))
    def check(inst):
        assert inst.fired
        ng.validate(inst.outputs)
        assert set(inst.feeds) == {n for n in ng.toposort(inst.outputs) if n.op == "Placeholder"}

    check()


def test_a_variable_used_twice_is_one_node():
    inst = first("rule r: x * x => Square(x)", lambda i: True)
    a, b = inst.outputs[0].args
    assert a is b


def test_a_named_sub_pattern_is_one_node_at_every_use():
    inst = first("rule r: Add(h, Log(h)) where h = Exp(x) => h", lambda i: True)
    args = inst.outputs[0].args
    h, log = args if args[0].op == "Exp" else args[::-1]
    assert log.args[0] is h


def test_optional_wrappers_are_drawn_present_and_absent():
    text = "rule r: Exp(Broadcast?(x)) => x"
    assert first(text, lambda i: i.outputs[0].args[0].op == "Broadcast")
    assert first(text, lambda i: i.outputs[0].args[0].op == "Placeholder")


def test_commutative_operands_come_in_both_orders():
    text = "rule r: x * 2 => x + x"
    assert first(text, lambda i: i.outputs[0].args[0].op == "Placeholder")
    assert first(text, lambda i: i.outputs[0].args[1].op == "Placeholder")


def test_literals_are_bare_and_broadcast_constants():
    text = "rule r: x + 0 => x"
    two = lambda i: [a for a in i.outputs[0].args if a.op != "Placeholder"][0]  # noqa: E731
    assert first(text, lambda i: two(i).op == "Constant" and two(i).axes)
    assert first(text, lambda i: two(i).op == "Broadcast")


def test_kinds_build_nodes_of_that_kind():
    inst = first("rule r: Dot(s: scalar, c: constant) => s", lambda i: True)
    s, c = inst.outputs[0].args
    assert len(s.axes) == 0 and is_constant(c)
    trait = first("rule r: Negative(v: view) => v", lambda i: True)
    assert ng.OPS[trait.outputs[0].args[0].op].has("view")


def test_rank_guards_are_built_in():
    hints = guard_hints(rule("rule r: x * y if len(x.axes) == 3 and y.rank >= 1 => x"))
    assert hints.ranks == {"x": (3, 3), "y": (1, 99)}

    @QUIET
    @given(instances(rule("rule r: Exp(x) if len(x.axes) == 3 => x")))
    def check(inst):
        assert len(inst.outputs[0].axes) == 3

    check()


def test_inputs_come_from_each_ops_domain():
    @QUIET
    @given(instances(rule("rule r: Log(a + b) / Sqrt(c) => Log(b + a) / Sqrt(c)")))
    def check(inst):
        values = {n.name: v for n, v in inst.feeds.items()}
        inside.append(bool((values["c"] >= 0).all()))  # Sqrt's own domain, its edge 0 included
        signs.add(bool((values["a"] > 0).all() and (values["b"] > 0).all()))

    signs: set[bool] = set()
    inside: list[bool] = []
    check()
    assert signs == {True, False}  # Log's domain passed through Add only some of the time
    assert sum(inside) > 0.7 * len(inside)  # outside Sqrt's domain only now and then


def test_domains_pass_down_through_sign_keeping_ops():
    assert argument_domain("Add", 0, "positive") == "positive"
    assert argument_domain("Multiply", 1, "nonzero") == "nonzero"
    assert argument_domain("Exp", 0, "positive") == "real"
    assert argument_domain("Subtract", 0, "positive") == "real"
    assert argument_domain("Log", 0, "real") == "positive"


def test_graphs_are_cast_to_float64_with_their_leaves():
    x = ng.placeholder([ng.make_axis(2, "A")], np.float32, name="x")
    y = ng.exp(x) * 0.5
    (y64,), memo = as_float64([y])
    assert y64.dtype == np.float64 and memo[x].dtype == np.float64 and memo[x].name == "x"


def test_fresh_axes_have_distinct_names_and_small_lengths():
    @QUIET
    @given(instances(rule("rule r: d @ Dot(x, y) => d * 1")))
    def check(inst):
        axes = {a.name: a.length for n in ng.toposort(inst.outputs) for a in n.axes.leaves()}
        assert all(1 <= k <= 5 for k in axes.values())

    check()
    assert Builder(lambda s: 2).fresh(0) == ng.make_axes(())


#: h is used under a Broadcast (which may keep any of its axes) and again beside Sum(y): the
#: two uses need the same axes, which only the second use's context says.
SHARED = """
rule shared:
    t @ Broadcast(h) * y + Broadcast(Sum(y) + h), n @ -z
    where h = Exp(x)
    if z.axes == h.axes
    => (t * 2, z * -1)
"""


def test_axes_classes_join_named_nodes_elementwise_operands_and_guards():
    r = rule(SHARED)
    cons = constraints(r.roots, guard_hints(r))
    same = lambda *ps: len({cons.of(p) for p in ps}) == 1  # noqa: E731
    var = PVar
    inner = r.roots[0].pattern.args[1].args[0]  # Sum(y) + h, under the second Broadcast
    assert same(var("h"), var("x"), inner)  # Exp and Add are elementwise; h is one node
    assert same(var("h"), var("z"), var("n"))  # the guard, then Negative
    assert same(var("t"), var("y"))
    assert not same(var("h"), var("y"))  # a Broadcast and a Sum lie between them
    assert cons.of(PVar("_")) is None


def built_and_tried(text: str, examples: int = 50) -> tuple[list[Instance], list]:
    """The attempts at instances of the rule: those that became instances, and all."""
    tried = []

    @settings(QUIET, max_examples=examples)
    @given(attempts(rule(text)))
    def check(attempt):
        tried.append(attempt)

    check()
    return [a for a in tried if isinstance(a, Instance)], tried


def test_a_named_node_gets_the_axes_all_its_uses_need():
    built, tried = built_and_tried(SHARED)
    # the rest are drawn with h's axes in another order than Sum(y) keeps them
    # (ranks up to 5 leave more orders to draw)
    assert len(built) >= 0.5 * len(tried), [getattr(a, "reason", "") for a in tried][:3]
    for inst in built:
        (h,) = [n for n in ng.toposort(inst.outputs) if n.op == "Exp"]
        assert inst.outputs[1].args[0].axes == h.axes  # z, by the guard


MEAN = """
rule centre:
    c @ x - Broadcast(m)
    where m = Sum(x) / Broadcast(n: Constant)
    if n.rank == 0 and GUARD
    => c * 1
"""


@pytest.mark.parametrize(
    "guard, value",
    [
        ("value(n) * size(m) == size(x)", 3),
        ("size(x) == size(m) * value(n)", 3),
        ("size(x) / value(n) == size(m)", 3),
        ("value(n) + 1 == size(m)", 1),
        ("size(x) - value(n) == size(m)", 4),
    ],
)
def test_a_guard_tying_a_constants_value_to_sizes_is_solved_for_it(guard, value):
    ((name, (expr,)),) = guard_hints(rule(MEAN.replace("GUARD", guard))).values.items()
    x = ng.placeholder([ng.make_axis(2, "A"), ng.make_axis(3, "B")], name="x")
    m = ng.placeholder([ng.make_axis(2, "A")], name="m")
    assert name == "n" and evaluate(expr, {"x": x, "m": m}) == value


def test_constants_are_built_with_the_value_their_guard_asks():
    built, tried = built_and_tried(MEAN.replace("GUARD", "value(n) * size(m) == size(x)"))
    assert len(built) >= 0.6 * len(tried)
    assert not [a for a in tried if "did not fire" in getattr(a, "reason", "")]


def test_an_op_whose_generator_takes_plain_leaves_is_built_without_a_sample_of_it(monkeypatch):
    """Learning an op's argument dtypes from a generator sample drew a whole extra node per
    op and instance (a fifth of the library's verification time); a generator marked
    `leaf_args` (only `leaf(...)` inputs) needs none, an unmarked one (Select's bool
    condition) still gets one."""
    from ngrules.verification.instances import generic

    sampled: list[str] = []
    real = generic.sample
    monkeypatch.setattr(generic, "sample", lambda b, op: sampled.append(op) or real(b, op))
    first("rule r: s @ Sum(Exp(x) * y) => s * 1", lambda i: True)
    assert not sampled
    inst = first("rule r: Select(c, a, b) + z => z + Select(c, a, b)", lambda i: True)
    assert "Select" in sampled
    (cond,) = [n for n in ng.toposort(inst.outputs) if n.op == "Select"][0].args[:1]
    assert cond.dtype == np.bool_


def _relabelled(inst) -> bool:
    """The root's operand holds all the root's axes, in another order."""
    root = inst.outputs[0]
    kept = [a for a in root.args[0].axes if a in root.axes]
    return len(kept) == len(root.axes) and kept != list(root.axes)


@pytest.mark.parametrize("text", [
    "rule r: t @ TensorSlice(b @ Broadcast(x)) if t.axes == x.axes => t * 1",
    "rule r: c @ AxesCast(ReorderAxes(x)) if c.axes == x.axes => c * 1",
])
def test_ops_that_name_their_result_by_position_get_operands_in_another_order(text):
    """TensorSlice and AxesCast transpose when the operand holds the result's axes in
    another order: `t.axes == x.axes` in place of `t.axes == b.axes & x.axes` is wrong only
    on such instances (issue: a weak slice_unit_broadcast guard came back verified)."""
    inst = first(text, _relabelled)
    before = ng.execute(inst.outputs, inst.feeds)[0]
    x = next(n for n in inst.feeds if n.name == "x")
    assert before.shape == inst.feeds[x].shape  # so that the next line compares values
    assert not np.array_equal(before, inst.feeds[x])  # the values moved: a transpose
