"""The op table: completeness, kernels against inference and numpy, and register_op."""

import inspect
import itertools
import os
import tempfile

import numpy as np
import pytest
from helpers import (
    FLOAT_DTYPES,
    REFERENCE_OPS,
    bn_bprop_reference,
    bn_reference,
    central_difference,
    draw_op_instance,
    einsum_dot,
    numpy_eval,
    tolerance,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import ngrules as ng
from ngrules.ir.declared import DECLARATIONS
from ngrules.ir.ops import DOMAINS, READ_FROM_MODELS, TRAITS

#: The built-in ops: not those a rules file declared or a model import added, which another
#: test module may have registered before this one is collected.
BUILTIN_OPS = sorted(n for n in ng.OPS if n not in DECLARATIONS and n not in READ_FROM_MODELS)
DESIGN_OPS = {
    "Placeholder",
    "Constant",
    "Variable",
    "Add",
    "Subtract",
    "Multiply",
    "Divide",
    "Maximum",
    "Minimum",
    "Greater",
    "Less",
    "Equal",
    "NotEqual",
    "GreaterEqual",
    "LessEqual",
    "Select",
    "Cast",
    "Sigmoid",
    "Erf",
    "Softmax",
    "Power",
    "Absolute",
    "Sign",
    "Argmax",
    "Argmin",
    "OneHot",
    "TensorSlice",
    "Unslice",
    "Pad",
    "ExpandDims",
    "AxesCast",
    "Convolution",
    "ConvBpropData",
    "ConvUpdate",
    "Pooling",
    "BpropPool",
    "Negative",
    "Reciprocal",
    "Sqrt",
    "Square",
    "Exp",
    "Log",
    "Tanh",
    "Sum",
    "Max",
    "Min",
    "Prod",
    "Dot",
    "DotLowDimension",
    "Broadcast",
    "ReorderAxes",
    "Transpose",
    "Flatten",
    "Unflatten",
    "Concat",
    "Slice",
    "BatchnormFprop",
    "BatchnormBprop",
}


def test_design_ops_are_all_declared():
    assert set(ng.OPS) >= DESIGN_OPS


@pytest.mark.parametrize("name", BUILTIN_OPS)
def test_op_has_every_entry(name):
    op = ng.OPS[name]
    assert op.name == name
    for field in ("infer", "kernel", "grad", "gen"):
        assert callable(getattr(op, field)), field
    assert op.traits <= TRAITS
    assert op.domain and set(op.domain) <= DOMAINS
    assert op.arity is None or op.arity >= 0
    assert (op.outputs > 1) == op.has("multi_output")
    assert op.has("leaf") == (op.arity == 0)
    assert op.doc.strip(), f"{name} has no doc"
    assert all(a.kind for a in op.attrs)


@pytest.mark.parametrize("name", BUILTIN_OPS)
def test_op_is_covered_by_every_test_family(name):
    """A new op must come with an independent numpy formula (kernel test) and either a gradient
    the finite-difference test checks or an explicit NotDifferentiable."""
    op = ng.OPS[name]
    assert name in REFERENCE_OPS, f"{name}: add its numpy formula to tests/helpers.py"
    if op.arity != 0:
        assert callable(op.grad)
        if not isinstance(op.grad, ng.NotDifferentiable):
            assert len(inspect.signature(op.grad).parameters) == 2, f"{name}: grad(node, delta)"


def as_float(array):
    """Bool and integer results compared as numbers (float16 ones in float64)."""
    return np.asarray(array, np.float64)


def _check_arrays(outputs, arrays):
    assert len(arrays) == len(outputs)
    for node, array in zip(outputs, arrays):
        assert array.shape == node.axes.lengths, node
        assert array.dtype == node.dtype, node


@pytest.mark.parametrize("name", BUILTIN_OPS)
@given(data=st.data())
def test_kernel_matches_inference_and_numpy(name, data):
    dtype = data.draw(st.sampled_from(FLOAT_DTYPES), label="dtype")
    node, outputs, feeds = draw_op_instance(data, name, dtype)
    assert node.op == name
    arrays = ng.execute(outputs, feeds)
    _check_arrays(outputs, arrays)
    for got, want in zip(arrays, numpy_eval(outputs, feeds)):
        np.testing.assert_allclose(as_float(got), as_float(want), **tolerance(dtype))


def test_multi_output_node_types_each_output():
    x = ng.placeholder({"C": 3, "N": 5}, np.float64, name="x")
    c = ng.make_axes({"C": 3})
    node = ng.make_node(
        "BatchnormFprop",
        (x, ng.placeholder(c, np.float64, name="g"), ng.placeholder(c, np.float64, name="b")),
    )
    assert node.outputs == (
        (x.axes, np.dtype(np.float64)),
        (c, np.dtype(np.float64)),
        (c, np.dtype(np.float64)),
    )
    assert [o.axes for o in ng.outputs_of(node)] == [x.axes, c, c]


# -- explicit checks against closed forms ----------------------------------------------------
def _axes(**lengths):
    return [ng.Axis(n, k) for n, k in lengths.items()]


def test_dot_contracts_every_shared_axis_like_einsum():
    a, b, c, d = _axes(A=2, B=3, C=4, D=5)
    rng = np.random.default_rng(0)
    x = ng.placeholder([a, b, c], np.float64, name="x")
    y = ng.placeholder([c, d, b], np.float64, name="y")
    xv, yv = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5, 3))
    (out,) = ng.execute([ng.dot(x, y)], {x: xv, y: yv})
    assert ng.dot(x, y).axes == [a, d]
    np.testing.assert_allclose(out, np.einsum("abc,cdb->ad", xv, yv), rtol=1e-12)
    np.testing.assert_allclose(out, einsum_dot(xv, yv, x.axes, y.axes), rtol=1e-12)


def _bn_inputs(rng, shape=(3, 4, 5)):
    x = rng.normal(size=shape) * 2 + 1
    return x, rng.normal(size=shape[:1]), rng.normal(size=shape[:1])


def test_batchnorm_fprop_uses_biased_variance_with_eps_inside_sqrt():
    rng, eps = np.random.default_rng(1), 0.3
    xv, gv, bv = _bn_inputs(rng)
    c, h, n = _axes(C=3, H=4, N=5)
    x = ng.placeholder([c, h, n], np.float64, name="x")
    g, b = (ng.placeholder([c], np.float64, name=k) for k in "gb")
    y, mean, var = ng.execute(list(ng.batchnorm_fprop(x, g, b, eps=eps)), {x: xv, g: gv, b: bv})
    flat = xv.reshape(3, -1)
    want_var = ((flat - flat.mean(1, keepdims=True)) ** 2).sum(1) / flat.shape[1]
    np.testing.assert_allclose(var, want_var, rtol=1e-12)
    np.testing.assert_allclose(mean, flat.mean(1), rtol=1e-12)
    xhat = (xv - mean[:, None, None]) / np.sqrt(want_var[:, None, None] + eps)
    np.testing.assert_allclose(y, gv[:, None, None] * xhat + bv[:, None, None], rtol=1e-12)
    np.testing.assert_allclose(y, bn_reference(xv, gv, bv, eps)[0], rtol=1e-12)
    wrong = (xv - mean[:, None, None]) / (np.sqrt(want_var[:, None, None]) + eps)
    assert not np.allclose(y, gv[:, None, None] * wrong + bv[:, None, None])


def test_batchnorm_bprop_is_the_gradient_of_fprop():
    """BatchnormBprop's (dx, dgamma, dbeta) equal finite differences of sum(y * delta)."""
    rng, eps = np.random.default_rng(2), 1e-3
    xv, gv, bv = _bn_inputs(rng, (2, 3, 2))
    delta = rng.normal(size=xv.shape)
    mean, var = xv.reshape(2, -1).mean(1), xv.reshape(2, -1).var(1)
    c, h, n = _axes(C=2, H=3, N=2)
    names = ("d", "x", "g", "m", "v")
    axes = ([c, h, n], [c, h, n], [c], [c], [c])
    ph = [ng.placeholder(ax, np.float64, name=k) for k, ax in zip(names, axes)]
    feeds = dict(zip(ph, (delta, xv, gv, mean, var)))
    dx, dgamma, dbeta = ng.execute(list(ng.batchnorm_bprop(*ph, eps=eps)), feeds)
    for got, want in zip((dx, dgamma, dbeta), bn_bprop_reference(delta, xv, gv, mean, var, eps)):
        np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_allclose(
        dx,
        central_difference(lambda v: (bn_reference(v, gv, bv, eps)[0] * delta).sum(), xv),
        rtol=1e-5,
        atol=1e-7,
    )
    np.testing.assert_allclose(
        dgamma,
        central_difference(lambda v: (bn_reference(xv, v, bv, eps)[0] * delta).sum(), gv),
        rtol=1e-6,
    )


# -- register_op -------------------------------------------------------------------------------
_op_names = itertools.count()


@pytest.fixture
def op_name():
    """A fresh op name, removed from the table afterwards whatever the test did."""
    name = f"TestOp{next(_op_names)}"
    yield name
    ng.OPS.pop(name, None)


def _swish_spec(name):
    def infer(args, attrs):
        return args[0].axes, args[0].dtype

    def grad(node, delta):
        x = node.args[0]
        sig = ng.reciprocal(1.0 + ng.exp(-x))
        return (delta * (sig + x * sig * (1.0 - sig)),)

    def gen(draw, leaf):
        return ng.make_node(name, (leaf({"A": draw(st.integers(1, 4))}),))

    return dict(
        arity=1,
        infer=infer,
        kernel=lambda node: lambda x: x / (1.0 + np.exp(-x)),
        grad=grad,
        gen=gen,
        traits={"elementwise", "fused"},
        doc="x * sigmoid(x)",
    )


def test_registered_op_is_usable_everywhere(op_name):
    op = ng.register_op(op_name, **_swish_spec(op_name))
    assert ng.OPS[op_name] is op
    x = ng.placeholder({"A": 3, "B": 2}, np.float64, name="x")
    y = ng.make_node(op_name, (x,))
    assert (y.axes, y.dtype) == (x.axes, x.dtype)
    xv = np.random.default_rng(3).normal(size=(3, 2))
    (out,) = ng.execute([y], {x: xv})
    np.testing.assert_allclose(out, xv / (1 + np.exp(-xv)), rtol=1e-12)
    program = ng.compile_graph([ng.sum(y, out_axes=())])
    (grad,) = ng.execute([ng.deriv(ng.sum(y, out_axes=()), x)], {x: xv})
    fd = central_difference(lambda v: program.run({x: v})[0].item(), xv)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"kernel": None}, "missing kernel"),
        ({"grad": None}, "missing grad"),
        ({"gen": None}, "missing gen"),
        ({"infer": None, "gen": None}, "missing infer, gen"),
        ({"traits": {"elementwise", "shiny"}}, "unknown traits ['shiny']"),
        ({"domain": ("imaginary",)}, "domain"),
        ({"arity": -1}, "arity"),
    ],
    ids=[
        "no-kernel",
        "no-grad",
        "no-gen",
        "no-infer-gen",
        "unknown-trait",
        "bad-domain",
        "bad-arity",
    ],
)
def test_half_specified_op_is_rejected(op_name, change, message):
    """The table itself takes only complete ops (ng.register_op fills defaults first)."""
    from ngrules.ir.ops import register_op as register_complete

    spec = {**_swish_spec(op_name), **change}
    with pytest.raises(ng.OpError) as info:
        register_complete(op_name, **spec)
    assert message in str(info.value)
    assert op_name in str(info.value)
    assert op_name not in ng.OPS


@pytest.mark.parametrize("name", ["Add", "BatchnormFprop"])
def test_duplicate_op_name_is_rejected(name):
    before = ng.OPS[name]
    with pytest.raises(ng.OpError, match="already registered"):
        ng.register_op(name, **_swish_spec(name))
    assert ng.OPS[name] is before


def test_unknown_op_suggests_a_close_name():
    x = ng.placeholder({"A": 2}, name="x")
    with pytest.raises(ng.OpError, match="did you mean 'Tanh'"):
        ng.make_node("Tahn", (x,))


@pytest.mark.parametrize("name", BUILTIN_OPS)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_every_op_round_trips_through_a_graph_file(name, data):
    """Attributes of every kind (slice specs, paddings, window geometry, dtypes) survive saving."""
    node, outputs, _ = draw_op_instance(data, name, np.float64)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "g.json")
        ng.save_graph(path, outputs)
        loaded = ng.load_graph(path)
    assert list(getattr(loaded, "outputs", loaded)) == outputs
