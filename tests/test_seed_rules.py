"""The two seed rewrites of ngraph-python, written as rules: they load, and dot lowering is right.

Dot lowering is ngraph's `RequiredTensorShaping` visit on `DotOp`; the batchnorm rules are
`CPUFusion`'s fprop and bprop patterns, as multi-root rules replaced by one fused op each.
"""

import numpy as np
import pytest

import ngrules as ng
from ngrules.engine.driver import rewrite
from ngrules.lang.loader import parse_rules
from ngrules.lang.syntax import PNamed, PVar

DOT_LOWERING = """
# ngraph's RequiredTensorShaping: Dot lowered to 1-D/2-D DotLowDimension products
pass dot_lowering

rule dot_no_reduction:                    # no shared axes: contract a fresh unit axis instead
    d @ Dot(x, y)
    if len(d.reduction_axes) == 0
    let u = new_axis(1)
    => Dot(broadcast(x, x.axes + u), broadcast(y, u + y.axes))

rule dot_scalar_scalar:                   # two (broadcast) scalars: a product times the size
    d @ Dot(Broadcast?(x: scalar), Broadcast?(y: scalar))
    => broadcast(x * y * size(d.reduction_axes), d.axes)

rule dot_scalar_left:                     # a scalar on the left is swapped to the right
    d @ Dot(Broadcast?(s: scalar), y)
    => broadcast(sum(y, reduction_axes=d.reduction_axes) * s, d.axes)

rule dot_scalar_right:
    d @ Dot(x, Broadcast?(s: scalar))
    => broadcast(sum(x, reduction_axes=d.reduction_axes) * s, d.axes)

rule dot_vector_vector:                   # every axis reduced: a scalar
    d @ Dot(x, y)
    if len(d.axes) == 0
    let r = d.reduction_axes
    => DotLowDimension(flatten(axes_with_order(x, r)), flatten(axes_with_order(y, r)), axes=())

rule dot_vector_matrix:                   # x holds only reduction axes: transpose(y) . x
    d @ Dot(x, y)
    let r = d.reduction_axes
    let xm = flatten_at(axes_with_order(x, (x.axes - r) + r), len(x.axes) - len(r))
    let ym = flatten_at(axes_with_order(y, r + (y.axes - r)), len(r))
    if len(xm.axes) == 1
    let yt = Transpose(ym)
    => axes_with_order(unflatten(DotLowDimension(yt, xm, axes=yt.axes[0])), d.axes)

rule dot_matrix_vector:                   # y holds only reduction axes
    d @ Dot(x, y)
    let r = d.reduction_axes
    let xm = flatten_at(axes_with_order(x, (x.axes - r) + r), len(x.axes) - len(r))
    let ym = flatten_at(axes_with_order(y, r + (y.axes - r)), len(r))
    if len(ym.axes) == 1
    => axes_with_order(unflatten(DotLowDimension(xm, ym, axes=xm.axes[0])), d.axes)

rule dot_matrix_matrix:                   # the general case: one 2-D product
    d @ Dot(x, y)
    let r = d.reduction_axes
    let xm = flatten_at(axes_with_order(x, (x.axes - r) + r), len(x.axes) - len(r))
    let ym = flatten_at(axes_with_order(y, r + (y.axes - r)), len(r))
    let out = (flatten_axes(d.x_out_axes), flatten_axes(d.y_out_axes))
    => axes_with_order(unflatten(DotLowDimension(xm, ym, axes=out)), d.axes)
"""

BATCHNORM_FUSION = """
# ngraph's CPUFusion: batchnorm forward and backward graphs fused into one op each
pass fusion

rule batchnorm_fprop:                     # y, mean and var become the fused op's outputs
    y @ Unflatten(xhat * Broadcast(gamma) + Broadcast(beta)), mean, var
    where xhat = (Flatten?(x) - Broadcast?(mean: Divide)) * Broadcast?(Reciprocal(sqrtvar))
    where sqrtvar = Sqrt(var: Divide + Broadcast?(eps: constant))
    => BatchnormFprop(x, gamma, beta, eps=value(eps))

rule batchnorm_bprop:                     # autodiff's expansion of the batchnorm backward pass
    dx @ Broadcast?(Sum(-dxmu1) * mean_1: Divide / Sum(Flatten(x))) + dx1,
    dgamma @ Sum(delta * xhat),
    dbeta @ Sum(delta)
    where delta    = Flatten(dy)
    where dxhat    = Broadcast(gamma) * delta
    where xmu1     = Flatten?(x) - Broadcast?(mean)
    where divar    = Sum(dxhat * xmu1)
    where dxmu1    = dxhat * ivar: Broadcast
    where dsqrtvar = inverse_sqrtvar: Reciprocal * negative_inverse_sqrtvar: Negative * divar
    where sqrtvar  = Sqrt(var: Divide + Broadcast?(eps: constant))
    where dvar     = dsqrtvar * Broadcast?(0.5) / sqrtvar
    where dsq      = dvar * var / sqrsum: Sum
    where dxmu2    = xmu2: Subtract * (Broadcast?(2) * Broadcast?(dsq))
    where dx1      = dxmu1 + (Broadcast?(Sum(-dxmu2) * mean_2: Divide / input_sum: Sum) + dxmu2)
    if len(x.axes) == 4 and x.dtype == "float32"
    => BatchnormBprop(dy, x, gamma, mean, var, eps=value(eps))

pipeline cpu: fusion
"""


def test_dot_lowering_loads_in_ngraph_order():
    rules = parse_rules(DOT_LOWERING, "dot.rules")
    assert [r.name for r in rules.passes["dot_lowering"]] == [
        "dot_no_reduction",
        "dot_scalar_scalar",
        "dot_scalar_left",
        "dot_scalar_right",
        "dot_vector_vector",
        "dot_vector_matrix",
        "dot_matrix_vector",
        "dot_matrix_matrix",
    ]


def test_batchnorm_fusion_loads_as_multi_root_rules():
    rules = parse_rules(BATCHNORM_FUSION, "bn.rules")
    fprop, bprop = rules.rule("batchnorm_fprop"), rules.rule("batchnorm_bprop")
    assert len(fprop.roots) == 3 and len(bprop.roots) == 3
    assert fprop.roots[1:] == (PVar("mean"), PVar("var"))
    assert rules.pipelines == {"cpu": ("fusion",)}


def _uses(pattern, name):
    stack, found = [pattern], 0
    while stack:
        p = stack.pop()
        if isinstance(p, PNamed) and p.name == name:
            found += 1
        stack.extend(getattr(p, "args", ()))
        if isinstance(p, PNamed):
            stack.append(p.pattern)
    return found


def test_batchnorm_shared_sub_patterns_are_one_node_at_every_use():
    bprop = parse_rules(BATCHNORM_FUSION).rule("batchnorm_bprop")
    # dxhat feeds dxmu1 and divar; dxmu1 appears in the root and in dx1, so many uses
    assert _uses(bprop.roots[0], "dxhat") >= 4
    assert _uses(bprop.roots[0], "dxmu2") == 2
    assert _uses(bprop.roots[1], "delta") == 1


AXES = {name: ng.make_axis(n, name) for name, n in [("A", 2), ("B", 3), ("C", 4), ("D", 5)]}


@pytest.mark.parametrize(
    "x_axes, y_axes, fired",
    [
        pytest.param("AB", "BC", ["dot_matrix_matrix"], id="matrix-matrix"),
        pytest.param("ABC", "BCD", ["dot_matrix_matrix"], id="flattened"),
        pytest.param("B", "B", ["dot_vector_vector"], id="vector-vector"),
        pytest.param("B", "BC", ["dot_vector_matrix"], id="vector-matrix"),
        pytest.param("AB", "B", ["dot_matrix_vector"], id="matrix-vector"),
        pytest.param("A", "C", ["dot_no_reduction", "dot_matrix_matrix"], id="outer"),
        pytest.param("", "AB", ["dot_no_reduction", "dot_scalar_left"], id="scalar-left"),
        pytest.param("AB", "", ["dot_no_reduction", "dot_scalar_right"], id="scalar-right"),
        pytest.param("", "", ["dot_no_reduction", "dot_scalar_scalar"], id="scalars"),
    ],
)
def test_dot_lowering_keeps_values(x_axes, y_axes, fired):
    rules = parse_rules(DOT_LOWERING, "dot.rules")
    xa, ya = [AXES[c] for c in x_axes], [AXES[c] for c in y_axes]
    x, y = ng.placeholder(xa, name="x"), ng.placeholder(ya, name="y")
    d = ng.dot(x, y)
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal([a.length for a in xa]).astype(np.float32),
        "y": rng.standard_normal([a.length for a in ya]).astype(np.float32),
    }
    res = rewrite([d], rules)
    assert [f.rule for f in res.trace] == fired
    assert "Dot" not in {n.op for n in ng.toposort(res.outputs)}
    np.testing.assert_allclose(
        ng.execute(res.outputs, feeds)[0], ng.execute([d], feeds)[0], rtol=1e-5, atol=1e-5
    )
