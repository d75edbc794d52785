"""The built-in pass `canonical_layout` (issue 38): layout views moved out of elementwise ops,
so a rule written against the model a user sees (`x * Sigmoid(x)`) matches an imported SiLU,
whose operands the importer reordered separately. Values never change."""

import numpy as np
import pytest

import ngrules as ng
from ngrules.ir.canonical import canonical_layout
from ngrules.ir.composite import decompose
from ngrules.lang.loader import parse_rules

N, H, C = ng.make_axis(2, "N"), ng.make_axis(3, "H"), ng.make_axis(4, "C")
RULES = """
op UxSilu(x) = x * Sigmoid(x)
pass fuse
rule silu: x * Sigmoid(x) => UxSilu(x)
pipeline as_written: decompose, fuse
pipeline canonical: decompose, canonical_layout, fuse
"""


def test_views_gather_above_elementwise_chains_and_values_stay():
    d, e = ng.placeholder([N, H, C], name="d"), ng.placeholder([N, H, C], name="e")
    order = [N, C, H]
    reordered = ng.axes_with_order(d, order) * ng.axes_with_order(ng.sigmoid(d), order)
    chain = ng.tanh(ng.axes_with_order(e, order)) + reordered
    wide = ng.broadcast(d, [N, H, C, ng.make_axis(5, "K")])
    spread = ng.exp(wide) - ng.broadcast(e, wide.axes)
    mixed = ng.axes_with_order(d, order) * ng.placeholder(order, name="f")  # one view: stays
    a, b = ng.placeholder([N], name="a"), ng.placeholder([H], name="b")
    outer = ng.make_node("Multiply", (ng.broadcast(a, [N, H]), ng.broadcast(b, [N, H])))
    assert canonical_layout([outer]) == [outer]  # no fewer axes to compute on: stays
    out = canonical_layout([reordered, chain, spread, mixed])
    assert out[0].op == "ReorderAxes" and out[0].args[0] == d * ng.sigmoid(d)
    assert out[1].op == "ReorderAxes" and out[1].args[0] == ng.tanh(e) + d * ng.sigmoid(d)
    assert out[2].op == "Broadcast" and out[2].args[0] == ng.exp(d) - e
    assert out[3] is mixed
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal((2, 3, 4)).astype(np.float32) for k in "de"}
    feeds["f"] = rng.standard_normal((2, 4, 3)).astype(np.float32)
    for before, after in zip(ng.execute([reordered, chain, spread, mixed], feeds),
                             ng.execute(out, feeds)):
        np.testing.assert_array_equal(before, after)


def test_an_imported_silu_matches_x_times_sigmoid_x_as_written(scratch_ops):
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    from ngrules.interop.onnx.importer import from_onnx

    rng = np.random.default_rng(1)
    weight = numpy_helper.from_array(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["d"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["d"], ["s"]), helper.make_node("Mul", ["d", "s"], ["z"])]
    graph = helper.make_graph(nodes, "silu", [helper.make_tensor_value_info("x", 1, [1, 2, 5, 5])],
                              [helper.make_tensor_value_info("z", 1, [1, 3, 5, 5])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    outputs = from_onnx(model)  # ONNX's ops kept whole: the rules read them after `decompose`
    assert outputs[0].op == "Mul" and outputs[0].args[0].op == "Conv"
    lowered = decompose(outputs, record=False)
    assert lowered[0].args[0].op == "ReorderAxes"  # the importer's form: each operand reordered
    rules = parse_rules(RULES, "silu.rules")
    assert ng.rewrite(outputs, rules, pipeline="as_written").fired() == {}
    done = ng.rewrite(outputs, rules, pipeline="canonical")
    assert done.fired() == {"silu": 1} and done.stop == "fixpoint"
    assert ng.rewrite(outputs, rules, passes=["fuse"]).fired() == {"silu": 1}  # by default
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(ng.execute(done.outputs, {"x": x})[0],
                               ng.execute(outputs, {"x": x})[0], rtol=1e-6, atol=1e-6)


def test_an_imported_keep_dims_rmsnorm_matches_as_written():
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    from ngrules.interop.onnx.importer import from_onnx

    eps = numpy_helper.from_array(np.array(1e-6, np.float32), "eps")
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["m"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["m", "eps"], ["me"]), helper.make_node("Sqrt", ["me"], ["r"]),
             helper.make_node("Div", ["x", "r"], ["z"])]
    graph = helper.make_graph(nodes, "rms", [helper.make_tensor_value_info("x", 1, [2, 3, 8])],
                              [helper.make_tensor_value_info("z", 1, [2, 3, 8])], [eps])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    outputs = from_onnx(model)  # ONNX's ops kept whole: the rules read them after `decompose`
    ops = {n.op for n in ng.toposort(decompose(outputs, record=False))}
    assert "TensorSlice" in ops  # the importer's keep-dims: a unit axis added, then sliced off
    rules = parse_rules(
        "pass fuse\nrule rms: x / Broadcast(s @ Sqrt(Sum(x * x) / n + e))\n"
        "    => x * broadcast(Reciprocal(s), x.axes)\n"
        "pipeline as_written: decompose, fuse\n"
        "pipeline canonical: decompose, canonical_layout, fuse\n", "rms.rules")
    assert ng.rewrite(outputs, rules, pipeline="as_written").fired() == {}
    done = ng.rewrite(outputs, rules, pipeline="canonical")
    assert done.fired() == {"rms": 1}
    assert ng.rewrite(outputs, rules, passes=["fuse"]).fired() == {"rms": 1}  # by default
    assert "TensorSlice" not in {n.op for n in ng.toposort(done.outputs)}
    x = np.random.default_rng(2).standard_normal((2, 3, 8)).astype(np.float32)
    want = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(1e-6))
    np.testing.assert_allclose(ng.execute(done.outputs, {"x": x})[0], want, rtol=1e-5)
    np.testing.assert_allclose(ng.execute(outputs, {"x": x})[0], want, rtol=1e-5)


def test_a_body_the_layout_pass_moved_is_still_its_onnx_op_for_the_writer():
    """canonical_layout rebuilds a body `decompose` wrote (SiLU's `Mul` of two reordered
    operands) without changing its value: the rebuilt body still stands for its ONNX op, so
    `recompose` (what the exporter does first) gives back the import's own nodes."""
    pytest.importorskip("onnx")
    from pathlib import Path

    from ngrules.interop.onnx.importer import from_onnx
    from ngrules.ir.composite import recompose

    model = Path(__file__).parent / "data" / "exported_forms" / "silu_conv.onnx"
    outputs = from_onnx(str(model))
    laid_out = canonical_layout(decompose(outputs))
    assert laid_out[0].op == "ReorderAxes" and laid_out[0].args[0].op == "Multiply"
    assert recompose(laid_out) == outputs


def test_a_later_pass_reads_whole_the_onnx_op_an_earlier_one_lowered(scratch_ops):
    """Pass `one` reads `Multiply` (so the `LayerNormalization` after the SiLU is lowered for
    it) and fuses the SiLU upstream; the layer norm is only rebuilt on the fused op, so pass
    `two`, whose rule names `LayerNormalization`, finds it whole again."""
    pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    from ngrules.interop.onnx.importer import from_onnx

    scale = numpy_helper.from_array(np.ones(8, np.float32), "g")
    bias = numpy_helper.from_array(np.zeros(8, np.float32), "b")
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["m"]),
             helper.make_node("LayerNormalization", ["m", "g", "b"], ["z"], axis=-1)]
    graph = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", 1, [2, 8])],
                              [helper.make_tensor_value_info("z", 1, [2, 8])], [scale, bias])
    outputs = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    rules = parse_rules("op UxSiluTwo(x) = x * Sigmoid(x)\npass one\n"
                        "rule silu: x * Sigmoid(x) => UxSiluTwo(x)\npass two\n"
                        "rule whole: n @ LayerNormalization(x, g, b)\n"
                        "    => axes_with_order(x, n.axes)\n", "two.rules")
    done = ng.rewrite(outputs, rules)
    assert done.fired() == {"silu": 1, "whole": 1}
    assert done.outputs[0].op == "UxSiluTwo"
