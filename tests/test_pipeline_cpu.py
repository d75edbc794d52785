"""The `cpu` pipeline end to end: a 3-layer MLP with batchnorm and leaky relu, differentiated,
shrinks to fewer than half its nodes and computes the same cost and gradients."""

from pathlib import Path

import numpy as np
import pytest

import ngrules as ng
from ngrules.ir.graph import toposort
from ngrules.ir.layers import batchnorm, leaky_relu

RULES = Path(__file__).resolve().parent.parent / "rules"
WIDTHS = (("F", 6), ("H1", 5), ("H2", 4), ("K", 3))
BATCH = ng.make_axis(8, "N")
EPS, SLOPE = 1e-3, 0.1


@pytest.fixture(scope="module")
def rules():
    return ng.load_rules(RULES)


def mlp(dtype):
    """The cost of a 3-layer MLP and its gradient for every parameter; parameters by name."""
    axes = [ng.make_axis(n, name) for name, n in WIDTHS]
    x = ng.placeholder([axes[0], BATCH], dtype, name="x")
    target = ng.placeholder([axes[-1], BATCH], dtype, name="target")
    params, a = [], x
    for layer, (fan_in, fan_out) in enumerate(zip(axes, axes[1:])):
        w = ng.placeholder([fan_out, fan_in], dtype, name=f"w{layer}")
        a = ng.dot(w, a)
        params.append(w)
        if layer < 2:
            gamma = ng.placeholder([fan_out], dtype, name=f"gamma{layer}")
            beta = ng.placeholder([fan_out], dtype, name=f"beta{layer}")
            a = leaky_relu(batchnorm(a, gamma, beta, EPS), SLOPE)
            params += [gamma, beta]
    cost = ng.sum(ng.square(a - target), out_axes=()) * 0.5
    return [cost] + [ng.deriv(cost, p) for p in params], params + [x, target]


def feeds_for(leaves, dtype):
    rng = np.random.default_rng(6)
    return {p: rng.normal(size=p.axes.lengths).astype(dtype) for p in leaves}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_mlp_through_cpu_pipeline_halves_the_graph_and_keeps_results(rules, dtype):
    outputs, leaves = mlp(dtype)
    res = ng.rewrite(outputs, rules, pipeline="cpu", checked=True)
    assert res.stop == "fixpoint", res.message
    before, after = toposort(outputs), toposort(res.outputs)
    assert len(after) < len(before) / 2, (len(before), len(after))
    fired = res.fired()
    assert fired["batchnorm_fprop"] == fired["batchnorm_bprop"] == 2
    assert fired["relu_fprop"] == fired["relu_bprop"] == 2
    ops = [n.op for n in after]
    assert "Dot" not in ops and ops.count("DotLowDimension") == 3 + 3 + 2  # y, dw, dx but x's
    feeds = feeds_for(leaves, dtype)
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-10}
    for got, want in zip(ng.execute(res.outputs, feeds), ng.execute(outputs, feeds)):
        np.testing.assert_allclose(got, want, **tol)


def test_each_pass_of_the_pipeline_is_declared_in_ngraphs_order(rules):
    """ngraph's CPU passes in its order, framed by the batchnorm folding before them and
    constant folding after them (neither in ngraph-python; cpu.rules says why); before them,
    the ONNX ops their rules read lowered, and after the fusions (and two passes that read
    them lowered) made whole again."""
    assert rules.pipelines["cpu"] == (
        "decompose_simple",
        "decompose_BatchNormalization",
        "decompose_Conv",
        "decompose_Gemm",
        "decompose_MatMul",
        "decompose_Einsum",
        "decompose_ReduceMean",
        "decompose_GlobalAveragePool",
        "decompose_Mul",
        "fold_batchnorm",
        "relu_fusion",
        "batchnorm_bprop",
        "batchnorm_fprop",
        "divide_form",
        "unit_slices",
        "recompose",
        "simplify",
        "dot_lowering",
        "shaping",
        "fold_constants",
    )


def test_a_multi_root_replacement_holding_another_firings_root_sees_it_replaced():
    """Two batchnorm layers: layer 1's delta holds layer 2's dx. Fusing both in one round once
    left layer 2's unfused dx inside layer 1's BatchnormBprop; this is the same in miniature."""
    rules = ng.parse_rules("pass p\nrule pair: e @ Exp(x), l @ Log(x) => (Tanh(x), Tanh(x))")
    x = ng.placeholder({"A": 2}, np.float64, name="x")
    inner = ng.exp(x) + 1.0  # holds the root Exp(x) of the other firing
    res = ng.rewrite([ng.log(x), ng.exp(inner), ng.log(inner)], rules)
    assert res.fired() == {"pair": 2}
    assert "Exp" not in {n.op for n in toposort(res.outputs)}, ng.format_graph(res.outputs)
