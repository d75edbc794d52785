"""ONNX export: valid models (full check) that onnxruntime runs to the executor's values,
fused ops included (as ngrules-domain functions)."""

import contextlib
from collections import Counter

import numpy as np
import pytest

import ngrules as ng

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ngrules.cli.demo import mlp  # noqa: E402
from ngrules.interop.onnx import OnnxError  # noqa: E402
from ngrules.lang.library import load_library  # noqa: E402


def run_ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString())
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


def assert_same(outputs, feeds, rtol=1e-6):
    model = ng.to_onnx(outputs)
    onnx.checker.check_model(model, full_check=True)
    for want, got in zip(ng.execute(outputs, feeds), run_ort(model, feeds)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    return model


def test_differentiated_mlp_before_and_after_fusion_runs_in_onnxruntime():
    outputs, feeds = mlp(batch=8)
    fused = ng.rewrite(outputs, load_library(), pipeline="cpu").outputs
    ops = {n.op for n in ng.toposort(fused)}
    assert {"BatchnormFprop", "BatchnormBprop", "Relu", "ReluBprop", "DotLowDimension"} <= ops
    assert_same(outputs, feeds)
    model = assert_same(fused, feeds, rtol=1e-8)
    assert {f.name for f in model.functions} == {"BatchnormFprop", "BatchnormBprop", "ReluBprop"}
    assert {n.op_type for n in model.graph.node} >= {"BatchnormFprop", "LeakyRelu", "MatMul"}


def test_views_reductions_slices_and_comparisons():
    a, b, c = ng.make_axis(2, "A"), ng.make_axis(3, "B"), ng.make_axis(4, "C")
    x = ng.placeholder([a, b, c], name="x")
    y = ng.placeholder([c, b], name="y")
    parts = [
        ng.dot(x, y),
        ng.broadcast(ng.sum(x, reduction_axes=[b]), [c, ng.make_axis(5, "D"), a]),
        ng.axes_with_order(x, [c, a, b]),
        ng.flatten_at(x, 1),
        ng.make_node("Slice", (x,), position=2, start=1, stop=3, axis=ng.make_axis(2, "S")),
        ng.tensor_slice(x, [1, slice(None), slice(0, 4, 2)]),
        ng.make_node("Unslice", (x,), slices=np.array([[1, 3, 1], [0, 3, 1], [0, 4, 1]]),
                     axes=[ng.make_axis(4, "A4"), b, c]),
        ng.make_node("Pad", (x,), paddings=np.array([[0, 0], [1, 2], [0, 0]]),
                     axes=[a, ng.make_axis(6, "B6"), c]),
        ng.make_node("ExpandDims", (x,), axis=ng.make_axis(2, "E"), position=1),
        ng.make_node("AxesCast", (x,), axes=[ng.make_axis(2, "P"), b, c]),
        ng.max(x, reduction_axes=[a, c]) - ng.min(x, reduction_axes=[a, c]),
        ng.transpose(y),
        ng.cast(ng.greater(x, 0.0), np.float32),
    ]
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 3, 4)).astype(np.float32),
             "y": rng.standard_normal((4, 3)).astype(np.float32)}
    assert_same(parts, feeds)


def test_variables_and_constants_export_as_initializers_of_their_values():
    c = ng.make_axis(3, "C")
    x = ng.placeholder([c], name="x", dtype=np.float64)
    v = ng.variable([c], name="v", initial=2.5, dtype=np.float64)
    k = ng.constant(np.arange(3.0), [c], dtype=np.float64)
    model = assert_same([x * v + k], {"x": np.ones(3)})
    assert {i.name for i in model.graph.initializer} >= {"v"}


def test_output_names_and_an_op_without_export_is_an_error():
    x = ng.placeholder([ng.make_axis(3, "A")], name="x")
    model = ng.to_onnx([ng.exp(x)], output_names=["e"])
    assert [o.name for o in model.graph.output] == ["e"]
    with pytest.raises(OnnxError, match="2 output names"):
        ng.to_onnx([x], output_names=["a", "b"])
    with user_op("Erfc"), pytest.raises(OnnxError, match="cannot export op Erfc"):
        ng.to_onnx([ng.make_node("Erfc", (x,))])


@contextlib.contextmanager
def user_op(name: str):
    """An op registered for one test and taken out of the table after it (random graphs
    elsewhere draw from the whole table)."""
    ng.register_op(name, arity=1, infer=lambda args, attrs: (args[0].axes, args[0].dtype),
                   kernel=lambda node: lambda a: a / (1.0 + np.exp(-a)),
                   grad=lambda n, d: (None,), gen=lambda draw, leaf: None)
    try:
        yield
    finally:
        ng.OPS.pop(name)


def test_a_user_op_exports_through_its_expansion():
    from ngrules.interop.onnx.exporter import EXPANSIONS, register_expansion

    register_expansion("Silu2", lambda n: n.args[0] * ng.sigmoid(n.args[0]))
    with user_op("Silu2"):
        x = ng.placeholder([ng.make_axis(5, "A")], name="x")
        model = assert_same([ng.make_node("Silu2", (x,)) + x], {"x": np.linspace(-2, 2, 5,
                                                                 dtype=np.float32)})
        assert "Sigmoid" in {n.op_type for n in model.graph.node}
    EXPANSIONS.pop("Silu2")


def test_an_axis_longer_than_an_int64_is_a_clear_error(tmp_path):
    """`export` of such an axis was a traceback from protobuf ("Value out of range")."""
    from test_cli import assert_bad_input, run

    x = ng.placeholder([ng.make_axis(2**63, "A")], name="x")
    with pytest.raises(OnnxError, match=r"axis A has length 9223372036854775808, more than"):
        ng.to_onnx([ng.tanh(x)])
    assert ng.to_onnx([ng.placeholder([ng.make_axis(2**63 - 1, "A")], name="x")])
    ng.save_graph(tmp_path / "g.json", [ng.tanh(x)])
    proc = run("export", "g.json", "-o", "m.onnx", cwd=tmp_path)
    assert_bad_input(proc, "cannot export Placeholder: axis A has length 9223372036854775808")
    assert not (tmp_path / "m.onnx").exists()


def test_an_op_declared_in_a_rules_file_exports_through_its_body(tmp_path):
    """No exporter and no expansion: the declared body is written as an ONNX function, and
    onnxruntime agrees."""
    path = tmp_path / "silu.rules"
    path.write_text("op SiluExported(x) = x * Sigmoid(x)\n")
    ng.load_rules(path)
    x = ng.placeholder([ng.make_axis(5, "A")], name="x")
    model = assert_same(
        [ng.make_node("SiluExported", (x,)) * 2.0], {"x": np.linspace(-2, 2, 5, dtype=np.float32)}
    )
    assert "SiluExported" in {n.op_type for n in model.graph.node}  # one node, its body a function
    assert "Sigmoid" in {n.op_type for f in model.functions for n in f.node}


@pytest.mark.parametrize("spans, ops", [
    ([(0, 2), (2, 4), (4, 6)], {"Split": 1}),  # a fused QKV projection's three parts
    ([(0, 2), (4, 6)], {"Split": 1}),  # the middle part an output nothing reads
    ([(0, 3), (2, 5)], {"Slice": 2}),  # overlapping: Slices
])
def test_slices_of_one_axis_are_one_split(spans, ops):
    f, n = ng.make_axis(6, "F"), ng.make_axis(3, "N")
    x = ng.placeholder([n, f], name="x")
    parts = [ng.make_node("Slice", (x,), position=1, start=a, stop=b,
                          axis=ng.make_axis(b - a, f"P{a}")) * 2.0 for a, b in spans]
    model = assert_same(parts, {"x": np.arange(18, dtype=np.float32).reshape(3, 6)})
    written = Counter(node.op_type for node in model.graph.node)
    assert {k: written[k] for k in ("Split", "Slice")} == {"Split": 0, "Slice": 0, **ops}


def test_two_constants_in_a_row_are_summed_into_one():
    n, c = ng.make_axis(3, "N"), ng.make_axis(4, "C")
    x = ng.placeholder([n, c], name="x")
    rng = np.random.default_rng(1)
    c1 = ng.constant(rng.standard_normal((3, 4)).astype(np.float32), [n, c])
    c2 = ng.constant(rng.standard_normal(4).astype(np.float32), [c])
    inner = x + c1
    feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32)}
    model = assert_same([(inner + c2) * c2 * c1], feeds, rtol=1e-5)
    assert Counter(node.op_type for node in model.graph.node) == Counter({"Add": 1, "Mul": 1})
    model = assert_same([inner + c2, inner], feeds, rtol=1e-5)  # the inner sum is read again
    assert Counter(node.op_type for node in model.graph.node) == Counter({"Add": 2})
