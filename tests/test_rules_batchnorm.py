"""rules/batchnorm.rules: batchnorm from primitives, differentiated, fuses into one
BatchnormFprop and one BatchnormBprop with the same values; near misses stay unfused."""

from pathlib import Path

import numpy as np
import pytest
from helpers import bn_bprop_reference, bn_reference, tolerance

import ngrules as ng
from ngrules.ir.graph import toposort

RULES = Path(__file__).resolve().parent.parent / "rules"
BN_RULES = ("batchnorm_fprop", "batchnorm_bprop")


@pytest.fixture(scope="module")
def rules():
    return ng.load_rules(RULES)


def test_the_folding_rules_verify(rules):
    """fold_batchnorm (stored statistics into the preceding Dot or Convolution, and a
    per-channel scale or shift into the convolution before it), which every shipped pipeline
    runs first."""
    folding = [r for r in rules if r.pass_name == "fold_batchnorm"]
    assert sorted(r.name for r in folding) == [
        "bias_under_convolution_view", "fold_batchnorm_biased_convolution",
        "fold_batchnorm_convolution", "fold_batchnorm_dot",
        "fold_scale_convolution", "fold_scale_unbiased_convolution", "fold_shift_convolution",
        "fold_shift_unbiased_convolution"]
    report = ng.verify(folding, 15)
    assert report.ok, str(report)


def axes(spec):
    return ng.make_axes([ng.make_axis(n, name) for name, n in spec])


SHAPES = {
    "2d": axes([("C", 3), ("N", 5)]),
    "4d": axes([("C", 2), ("H", 3), ("W", 2), ("N", 4)]),
}


# -- batchnorm written from primitives, and its near misses --------------------------------------
def statistics(x, channel, variant):
    """mean and variance of x over all axes but the channel, or a near miss of them."""
    if variant in ("unbiased", "wrong-count"):
        m = float(x.axes.size // channel.size)
        mean_div, var_div = (m, m - 1) if variant == "unbiased" else (m + 1, m + 1)
        mean = ng.sum(x, out_axes=channel) / mean_div
        return mean, ng.sum(ng.square(x - mean), out_axes=channel) / var_div
    of = ng.tanh(x) if variant == "other-tensor" else x
    return ng.mean(x, out_axes=channel), ng.variance(of, out_axes=channel)


def batchnorm(x, gamma, beta, eps, variant="exact"):
    """gamma * (x - mean) / sqrt(var + eps) + beta over all axes of x but the first."""
    channel = x.axes[:1]
    mean, var = statistics(x, channel, variant)
    if variant == "eps-per-channel":
        eps = ng.constant(np.linspace(eps, 2 * eps, channel.size), channel, x.dtype)
    if variant == "eps-outside":
        scale = ng.reciprocal(ng.sqrt(var) + eps)
    else:
        scale = ng.reciprocal(ng.sqrt(var + eps))
    return gamma * ((x - mean) * scale) + beta


class Case:
    """x, gamma, beta placeholders; y and the gradients of sum(y * delta); random feeds."""

    def __init__(self, shape, dtype, eps, variant="exact", flattened=False, seed=0):
        x_axes = SHAPES[shape]
        self.x = ng.placeholder(x_axes, dtype, name="x")
        gamma_axes = x_axes[:1] + x_axes[-1:] if variant == "gamma-along-N" else x_axes[:1]
        self.gamma = ng.placeholder(gamma_axes, dtype, name="gamma")
        self.beta = ng.placeholder(x_axes[:1], dtype, name="beta")
        self.delta = ng.placeholder(x_axes, dtype, name="delta")
        inner = ng.flatten_at(self.x, 1) if flattened else self.x
        y = batchnorm(inner, self.gamma, self.beta, eps, variant)
        self.y = ng.unflatten(y) if flattened else y
        cost = ng.sum(self.y * self.delta, out_axes=())
        self.grads = [ng.deriv(cost, p) for p in (self.x, self.gamma, self.beta)]
        self.outputs = [self.y, *self.grads]
        rng = np.random.default_rng(seed)
        self.feeds = {
            p: (rng.normal(size=p.axes.lengths) * 2 + 0.5).astype(dtype)
            for p in (self.x, self.gamma, self.beta, self.delta)
        }
        self.eps = eps

    def run(self, outputs):
        return ng.execute(outputs, self.feeds, ignore_unused=True)

    def closed_form(self):
        """y, dx, dgamma, dbeta by reference §4's formulas, in float64."""
        x, g, b, d = (
            np.float64(self.feeds[p]) for p in (self.x, self.gamma, self.beta, self.delta)
        )
        y, mean, var = bn_reference(x, g, b, self.eps)
        return [y, *bn_bprop_reference(d, x, g, mean, var, self.eps)]


def fuse(rules, case):
    res = ng.rewrite(case.outputs, rules, pipeline="cpu", checked=True)
    assert res.stop == "fixpoint", res.message
    return res, [n.op for n in toposort(res.outputs)]


def assert_close(got, want, dtype, float64_tol=1e-10):
    tol = (
        tolerance(dtype) if np.dtype(dtype) == np.float32 else {"rtol": float64_tol, "atol": 1e-12}
    )
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **tol)


# -- the fusion fires, once each way, and keeps every value --------------------------------------
@pytest.mark.parametrize("eps", [1e-3, 0.0], ids=["eps", "eps0"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize(
    "shape, flattened", [("2d", False), ("4d", False), ("4d", True)], ids=["2d", "4d", "4d-flat"]
)
def test_batchnorm_fuses_once_each_way_with_equal_results(rules, shape, flattened, dtype, eps):
    case = Case(shape, dtype, eps, flattened=flattened)
    res, ops = fuse(rules, case)
    fired = res.fired()
    assert (fired.get("batchnorm_fprop"), fired.get("batchnorm_bprop")) == (1, 1)
    assert ops.count("BatchnormFprop") == ops.count("BatchnormBprop") == 1
    assert not {"Sqrt", "Reciprocal", "Square", "Divide"} & set(ops), ops  # statistics once
    fused = case.run(res.outputs)
    assert_close(fused, case.run(case.outputs), dtype)
    assert_close(fused, case.closed_form(), dtype, float64_tol=1e-9)


def test_the_backward_op_reads_the_forward_ops_statistics(rules):
    case = Case("2d", np.float64, 1e-3)
    res, _ = fuse(rules, case)
    nodes = toposort(res.outputs)
    (fprop,) = [n for n in nodes if n.op == "BatchnormFprop"]
    (bprop,) = [n for n in nodes if n.op == "BatchnormBprop"]
    assert [(a.op, a.args[0], a.attrs["index"]) for a in bprop.args[3:]] == [
        ("Output", fprop, 1),
        ("Output", fprop, 2),
    ]
    assert bprop.args[1] is case.x and bprop.args[2] is case.gamma
    assert fprop.attrs["eps"] == bprop.attrs["eps"] == 1e-3


def test_forward_alone_fuses_with_mean_and_variance_as_outputs(rules):
    case = Case("4d", np.float64, 1e-3)
    mean = ng.mean(case.x, out_axes=case.x.axes[:1])
    res = ng.rewrite([case.y, mean], rules, pipeline="cpu")
    assert res.fired() == {"batchnorm_fprop": 1}
    assert [o.op for o in res.outputs] == ["Output", "Output"]
    assert_close(case.run(res.outputs), case.run([case.y, mean]), np.float64)


def test_backward_alone_fuses_on_the_primitive_statistics(rules):
    case = Case("2d", np.float64, 1e-3)
    res = ng.rewrite(case.grads, rules, pipeline="cpu")
    assert res.fired().get("batchnorm_bprop") == 1 and "batchnorm_fprop" not in res.fired()
    assert_close(case.run(res.outputs), case.run(case.grads), np.float64)


# -- near misses: the rules must not fire, and values stay equal ---------------------------------
NEAR_MISSES = [
    "eps-outside",
    "eps-per-channel",
    "unbiased",
    "wrong-count",
    "other-tensor",
    "gamma-along-N",
]


@pytest.mark.parametrize("variant", NEAR_MISSES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_near_misses_are_left_alone(rules, variant, dtype):
    case = Case("2d", dtype, 1e-3, variant=variant)
    res, ops = fuse(rules, case)
    assert not set(BN_RULES) & set(res.fired())
    assert not {"BatchnormFprop", "BatchnormBprop"} & set(ops)
    assert_close(case.run(res.outputs), case.run(case.outputs), dtype)


def test_a_channel_axis_that_is_not_first_is_left_alone(rules):
    """BatchnormFprop normalises over all axes but the first; mean over N of [N, C] is not that."""
    n, c = ng.make_axis(4, "N"), ng.make_axis(3, "C")
    x = ng.placeholder([n, c], np.float64, name="x")
    g, b = (ng.placeholder([c], np.float64, name=k) for k in "gb")
    mean, var = ng.mean(x, out_axes=[c]), ng.variance(x, out_axes=[c])
    y = g * ((x - mean) * ng.reciprocal(ng.sqrt(var + 1e-3))) + b
    assert not set(BN_RULES) & set(ng.rewrite([y], rules, pipeline="cpu").fired())
