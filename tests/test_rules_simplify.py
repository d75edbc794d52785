"""rules/simplify.rules (ngraph's SimplePrune) and rules/shaping.rules (CPUTensorShaping):
each rule fires where it should, leaves the values unchanged, and stays away from lookalikes."""

from pathlib import Path

import numpy as np
import pytest

import ngrules as ng
from ngrules.ir.graph import toposort

RULES = Path(__file__).resolve().parent.parent / "rules"
A, B, C = ng.make_axis(2, "A"), ng.make_axis(3, "B"), ng.make_axis(4, "C")
UNIT = ng.make_axis(1, "U")
BC = ng.FlattenedAxis([B, C])


@pytest.fixture(scope="module")
def rules():
    return ng.load_rules(RULES)


def leaves():
    """x and y of axes [A, B], z of [A, B, C], f of [A, Flat(B, C)]; all float64."""
    return {
        "x": ng.placeholder([A, B], np.float64, name="x"),
        "y": ng.placeholder([A, B], np.float64, name="y"),
        "z": ng.placeholder([A, B, C], np.float64, name="z"),
        "f": ng.placeholder([A, BC], np.float64, name="f"),
    }


def feeds_for(node):
    """Positive values (log is applied to some) for the placeholders under node."""
    rng = np.random.default_rng(5)
    leaves = [n for n in toposort([node]) if n.op == "Placeholder"]
    return {n: rng.uniform(0.5, 2.0, n.axes.lengths) for n in leaves}


def _view(op, x, axes):
    return ng.make_node(op, (x,), axes=ng.make_axes(axes))


# name: (pass, builder, the rule that fires, what the result is: a leaf's name or an op)
FIRES = {
    "x*0": ("simplify", lambda v: v["x"] * 0.0, "mul_zero", "Broadcast"),
    "0*x": ("simplify", lambda v: 0.0 * v["x"], "mul_zero", "Broadcast"),
    "x*1": ("simplify", lambda v: v["x"] * 1.0, "mul_one", "x"),
    "1*x": ("simplify", lambda v: 1.0 * v["x"], "mul_one", "x"),
    "x*-1": ("simplify", lambda v: v["x"] * -1.0, "mul_minus_one", "Negative"),
    "x+0": ("simplify", lambda v: v["x"] + 0.0, "add_zero", "x"),
    "0+x": ("simplify", lambda v: 0.0 + v["x"], "add_zero", "x"),
    "--x": ("simplify", lambda v: -(-v["x"]), "neg_neg", "x"),
    "log-exp": ("simplify", lambda v: ng.log(ng.exp(v["x"])), "log_exp", "x"),
    "log-exp-div": (
        "simplify",
        lambda v: ng.log(ng.exp(v["x"]) / v["y"]),
        "log_exp_div",
        "Subtract",
    ),
    "-c": ("simplify", lambda v: -ng.constant(2.5, [A, B], np.float64), "neg_const", "Broadcast"),
    "sum-c": (
        "simplify",
        lambda v: ng.sum(ng.constant(1.5, [A, B], np.float64), reduction_axes=[B]),
        "sum_const",
        "Broadcast",
    ),
    "prod-c": (
        "simplify",
        lambda v: ng.prod(ng.constant(1.5, [A, B], np.float64), reduction_axes=[A, B]),
        "prod_const",
        "Constant",
    ),
    "reorder-identity": (
        "shaping",
        lambda v: _view("ReorderAxes", v["x"], [A, B]),
        "reorder_identity",
        "x",
    ),
    "broadcast-identity": (
        "shaping",
        lambda v: _view("Broadcast", v["x"], [A, B]),
        "broadcast_identity",
        "x",
    ),
    "transpose-transpose": (
        "shaping",
        lambda v: ng.transpose(ng.transpose(v["z"])),
        "transpose_transpose",
        "z",
    ),
    "reorder-reorder": (
        "shaping",
        lambda v: ng.axes_with_order(ng.axes_with_order(v["z"], [C, A, B]), [B, C, A]),
        "reorder_reorder",
        "ReorderAxes",
    ),
    "reorder-reorder-back": (
        "shaping",
        lambda v: ng.axes_with_order(ng.axes_with_order(v["z"], [C, A, B]), [A, B, C]),
        "reorder_reorder",
        "z",
    ),
    "broadcast-broadcast": (
        "shaping",
        lambda v: ng.broadcast(ng.broadcast(v["x"], [A, B, C]), [UNIT, C, B, A]),
        "broadcast_broadcast",
        "Broadcast",
    ),
    "broadcast-reorder": (
        "shaping",
        lambda v: ng.broadcast(ng.axes_with_order(v["x"], [B, A]), [C, A, B]),
        "broadcast_reorder",
        "Broadcast",
    ),
    "reorder-broadcast": (
        "shaping",
        lambda v: ng.axes_with_order(ng.broadcast(v["x"], [A, B, C]), [C, B, A]),
        "reorder_broadcast",
        "Broadcast",
    ),
    "unflatten-flatten": (
        "shaping",
        lambda v: ng.unflatten(ng.flatten(v["f"])),
        "unflatten_flatten",
        "f",
    ),
    "flatten-unflatten": (
        "shaping",
        lambda v: ng.flatten(ng.unflatten(v["f"]), [A, BC]),
        "flatten_unflatten",
        "f",
    ),
    "sum-unit-broadcast": (
        "shaping",
        lambda v: ng.sum(ng.broadcast(v["x"], [B, UNIT, A]), reduction_axes=[UNIT]),
        "sum_unit_broadcast",
        "ReorderAxes",
    ),
}


def run(rules, pass_name, node):
    res = ng.rewrite([node], rules, passes=[pass_name], checked=True)
    feeds = feeds_for(node)
    np.testing.assert_allclose(*ng.execute([res.outputs[0], node], feeds), rtol=1e-13)
    return res


@pytest.mark.parametrize("case", FIRES)
def test_rule_fires_and_keeps_the_value(rules, case):
    pass_name, build, rule, result = FIRES[case]
    nodes = leaves()
    node = build(nodes)
    res = run(rules, pass_name, node)
    assert [f.rule for f in res.trace] == [rule]
    out = res.outputs[0]
    assert out is nodes[result] if result in nodes else out.op == result


# name: (pass, builder): near misses no rule of the pass may rewrite
LEFT_ALONE = {
    "x*2": ("simplify", lambda v: v["x"] * 2.0),
    "x+0.5": ("simplify", lambda v: v["x"] + 0.5),
    "x*[0,1,0]": ("simplify", lambda v: v["x"] * ng.constant(np.eye(2, 3), [A, B], np.float64)),
    "x*y": ("simplify", lambda v: v["x"] * v["y"]),
    "sum-x": ("simplify", lambda v: ng.sum(v["x"], reduction_axes=[B])),
    "log-x/y": ("simplify", lambda v: ng.log(v["x"] / v["y"])),
    "-x": ("simplify", lambda v: -v["x"]),
    "reorder": ("shaping", lambda v: ng.axes_with_order(v["x"], [B, A])),
    "regroup": (
        "shaping",
        lambda v: _view("Unflatten", ng.flatten(v["z"]), [ng.FlattenedAxis([A, B]), C]),
    ),
    "sum-long-broadcast": (
        "shaping",
        lambda v: ng.sum(ng.broadcast(v["x"], [A, B, C]), reduction_axes=[C]),
    ),
}


@pytest.mark.parametrize("case", LEFT_ALONE)
def test_near_misses_are_left_alone(rules, case):
    pass_name, build = LEFT_ALONE[case]
    nodes = leaves()
    node = build(nodes)
    res = run(rules, pass_name, node)
    assert res.trace == [] and res.outputs[0] is node


def test_constants_fold_to_their_values(rules):
    total = ng.sum(ng.constant(1.5, [A, B], np.float32), reduction_axes=[B])
    product = ng.prod(ng.constant(1.5, [A, B], np.float32), reduction_axes=[A, B])
    negated = -ng.constant(2.5, [A], np.float32)
    res = ng.rewrite([total, product, negated], rules, passes=["simplify"])
    got = ng.execute(res.outputs, {})
    for array, want in zip(got, (4.5, 1.5**6, -2.5)):
        assert array.dtype == np.float32 and np.all(array == np.float32(want))


@pytest.mark.parametrize(
    ("count", "value", "dtype", "expected"),
    [(2000, 2.0, np.float32, np.inf), (2001, -2.0, np.float64, -np.inf), (300, 2.0, np.float32,
     np.inf), (300, 2.0, np.float64, 2.0**300), (5, 0.5, np.float32, 0.5**5)],
)
def test_prod_const_is_c_to_the_n_in_the_dtype_and_inf_when_that_overflows(
    rules, count, value, dtype, expected
):
    n = ng.make_axis(count, "N")
    node = ng.prod(ng.constant(value, [n], dtype), out_axes=())
    res = ng.rewrite([node], rules, passes=["simplify"])
    assert res.fired() == {"prod_const": 1} and not res.warnings
    (out,) = ng.execute(res.outputs, {})
    assert out.dtype == dtype and out == np.asarray(expected, dtype)
