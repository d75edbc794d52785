"""rules/dot.rules through the `cpu` pipeline: every Dot becomes DotLowDimension products of
rank <= 2, and the values equal np.einsum on the same data."""

import string
from pathlib import Path

import numpy as np
import pytest
from helpers import tolerance
from hypothesis import given
from hypothesis import strategies as st

import ngrules as ng
from ngrules.ir.graph import toposort

RULES = Path(__file__).resolve().parent.parent / "rules"


@pytest.fixture(scope="module")
def rules():
    return ng.load_rules(RULES)


def lower(rules, outputs):
    """The cpu pipeline on outputs, checked: the result and the ops it left."""
    res = ng.rewrite(outputs, rules, pipeline="cpu", checked=True)
    assert res.stop == "fixpoint", res.message
    return res, toposort(res.outputs)


def assert_lowered(nodes):
    """No Dot is left, and every DotLowDimension multiplies 1-D or 2-D operands."""
    assert "Dot" not in {n.op for n in nodes}
    for n in nodes:
        if n.op == "DotLowDimension":
            assert len(n.axes) <= 2 and all(1 <= len(a.axes) <= 2 for a in n.args), n


def einsum(x_axes, y_axes, out_axes, xv, yv):
    """The Dot by np.einsum, one letter per axis name (a flattened axis is one letter)."""
    names = dict.fromkeys(a.name for a in (*x_axes, *y_axes))
    letter = dict(zip(names, string.ascii_letters))
    spec = "{},{}->{}".format(
        *("".join(letter[a.name] for a in axes) for axes in (x_axes, y_axes, out_axes))
    )
    return np.einsum(spec, xv, yv)


# -- random Dot configurations -------------------------------------------------------------------
@st.composite
def dot_axes(draw):
    """Axes of x and y: 0-3 shared, 0-4 per operand, lengths 1-5, some already flattened."""
    shared = draw(st.integers(0, 3))
    only_x = draw(st.integers(0, 4 - shared))
    only_y = draw(st.integers(0, 4 - shared))
    names = [f"S{i}" for i in range(shared)] + [f"X{i}" for i in range(only_x)]
    names += [f"Y{i}" for i in range(only_y)]
    axes = {n: draw(_axis(n)) for n in names}
    x = draw(st.permutations([axes[n] for n in names if n[0] in "SX"]))
    y = draw(st.permutations([axes[n] for n in names if n[0] in "SY"]))
    return ng.make_axes(x), ng.make_axes(y)


def _axis(name):
    plain = st.integers(1, 5).map(lambda n: ng.Axis(name, n))
    flat = st.tuples(st.integers(1, 3), st.integers(1, 3)).map(
        lambda ab: ng.FlattenedAxis([ng.Axis(name + "a", ab[0]), ng.Axis(name + "b", ab[1])])
    )
    return st.one_of(plain, flat)


def operand(axes, dtype, name, scalar: bool):
    """A placeholder of the axes, or a 0-d placeholder broadcast to them (a scalar operand)."""
    if scalar:
        source = ng.placeholder([], dtype, name=name)
        return ng.broadcast(source, axes), source
    node = ng.placeholder(axes, dtype, name=name)
    return node, node


@given(
    axes=dot_axes(),
    dtype=st.sampled_from([np.float32, np.float64]),
    scalars=st.sampled_from([(False, False), (True, False), (False, True), (True, True)]),
    seed=st.integers(0, 2**16),
)
def test_random_dots_lower_to_low_rank_products_equal_to_einsum(rules, axes, dtype, scalars, seed):
    (x, xs), (y, ys) = (operand(a, dtype, n, s) for a, n, s in zip(axes, "xy", scalars))
    d = ng.dot(x, y)
    rng = np.random.default_rng(seed)
    feeds = {p: rng.uniform(-2, 2, p.axes.lengths).astype(dtype) for p in {xs, ys}}
    res, nodes = lower(rules, [d])
    assert_lowered(nodes)
    (got,) = ng.execute(res.outputs, feeds)
    xv, yv = (np.broadcast_to(feeds[s], a.lengths) for s, a in ((xs, x.axes), (ys, y.axes)))
    want = einsum(x.axes, y.axes, d.axes, xv, yv)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, want, **tolerance(dtype))


# -- each case of ngraph's algorithm, and the rules it takes -------------------------------------
AXES = {c: ng.make_axis(n, c) for c, n in zip("ABCDE", (2, 3, 4, 5, 3))}
FLAT = ng.FlattenedAxis([AXES["D"], AXES["E"]])


def _axes_of(spec):
    return [FLAT if c == "F" else AXES[c] for c in spec]


CASES = [
    ("AB", "BC", ["dot_matrix_matrix"], "matrix-matrix"),
    ("BA", "CB", ["dot_reorder", "dot_matrix_matrix"], "reordered"),
    ("ABC", "BCD", ["dot_matrix_matrix"], "two-shared"),
    ("B", "B", ["dot_vector_vector"], "vector-vector"),
    ("AB", "BA", ["dot_reorder", "dot_vector_vector"], "vector-vector-2d"),
    ("B", "BC", ["dot_vector_matrix"], "vector-matrix"),
    ("AB", "B", ["dot_matrix_vector"], "matrix-vector"),
    ("A", "C", ["dot_no_reduction", "dot_matrix_matrix"], "outer"),
    ("", "AB", ["dot_no_reduction", "dot_scalar_left"], "scalar-left"),
    ("AB", "", ["dot_no_reduction", "dot_scalar_right"], "scalar-right"),
    ("", "", ["dot_no_reduction", "dot_scalar_scalar"], "scalar-scalar"),
    ("FB", "BC", ["dot_matrix_matrix"], "flattened-matrix"),
    ("B", "BF", ["dot_vector_matrix"], "flattened-vector-matrix"),
    ("FB", "B", ["dot_matrix_vector"], "flattened-matrix-vector"),
]


@pytest.mark.parametrize("x_spec, y_spec, fired", [c[:3] for c in CASES], ids=[c[3] for c in CASES])
def test_each_case_takes_ngraphs_branch(rules, x_spec, y_spec, fired):
    x = ng.placeholder(_axes_of(x_spec), np.float64, name="x")
    y = ng.placeholder(_axes_of(y_spec), np.float64, name="y")
    d = ng.dot(x, y)
    res, nodes = lower(rules, [d])
    assert [f.rule for f in res.trace if f.pass_name == "dot_lowering"] == fired
    assert_lowered(nodes)
    rng = np.random.default_rng(1)
    feeds = {p: rng.normal(size=p.axes.lengths) for p in (x, y)}
    (got,) = ng.execute(res.outputs, feeds)
    np.testing.assert_allclose(got, einsum(x.axes, y.axes, d.axes, feeds[x], feeds[y]), rtol=1e-12)


def test_a_flattened_output_axis_survives_the_one_dimensional_branch(rules):
    """ngraph's 1-D branches unflattened an already-flattened output axis one level too far."""
    x = ng.placeholder(_axes_of("FB"), np.float64, name="x")
    y = ng.placeholder(_axes_of("B"), np.float64, name="y")
    res, _ = lower(rules, [ng.dot(x, y)])
    assert res.outputs[0].axes == [FLAT]
    assert res.outputs[0].op == "Unflatten" and res.outputs[0].args[0].op == "DotLowDimension"


def test_the_vector_matrix_case_uses_the_transpose(rules):
    x = ng.placeholder(_axes_of("B"), np.float64, name="x")
    y = ng.placeholder(_axes_of("BCA"), np.float64, name="y")
    res, nodes = lower(rules, [ng.dot(x, y)])
    (low,) = [n for n in nodes if n.op == "DotLowDimension"]
    assert low.args[0].op == "Transpose" and low.args[1] is x
