"""Shape computations the importer folds come back as the model's own nodes (`recipes`): the
round trip with no rule keeps an `_expanded`-style chain of Shape, Gather, Concat, Size, Range,
Cast, Sqrt...; a rule that rewrites the op reading the chain's value makes the chain go away,
and the model written still computes the same numbers."""

from collections import Counter

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ngrules as ng
from ngrules.interop.onnx.exporter import to_onnx
from ngrules.interop.onnx.importer import import_model


def _const(name, values):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, TensorProto.INT64, [len(values)], values))


def _model(nodes, inputs, out, opset=18):
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, out)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(model)


def _chain():
    """Y = ReduceSum(Reshape(X, [batch, last, -1]) / sqrt(width) * ones, Range(1, rank)),
    every shape value computed from X, and a Shape nothing reads."""
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    nodes = [
        helper.make_node("Shape", ["X"], ["XShape"]),
        helper.make_node("Shape", ["X"], ["Unused"], start=1, end=2),
        _const("Zero", [0]),
        helper.make_node("Gather", ["XShape", "Zero"], ["Batch"], axis=0),
        helper.make_node("Shape", ["X"], ["Last"], start=-1),
        _const("MinusOne", [-1]),
        helper.make_node("Concat", ["Batch", "Last", "MinusOne"], ["Target"], axis=0),
        helper.make_node("Reshape", ["X", "Target"], ["Flat"]),
        helper.make_node("Shape", ["Flat"], ["Width"], start=-1),
        helper.make_node("Cast", ["Width"], ["WidthF"], to=TensorProto.FLOAT),
        helper.make_node("Sqrt", ["WidthF"], ["Root"]),
        helper.make_node("Reciprocal", ["Root"], ["Scale"]),
        helper.make_node("Mul", ["Flat", "Scale"], ["Scaled"]),
        helper.make_node("Shape", ["Flat"], ["FlatShape"]),
        helper.make_node("ConstantOfShape", ["FlatShape"], ["Ones"], value=one),
        helper.make_node("Mul", ["Scaled", "Ones"], ["Biased"]),
        helper.make_node("Size", ["FlatShape"], ["Rank"]),
        _const("One", [1]),
        helper.make_node("Squeeze", ["One"], ["OneScalar"]),
        helper.make_node("Range", ["OneScalar", "Rank", "OneScalar"], ["Axes"]),
        helper.make_node("ReduceSum", ["Biased", "Axes"], ["Y"], keepdims=0),
    ]
    return _model(nodes, [("X", [2, 3, 4])], [2])


def _expected(x):
    return (x.reshape(2, 4, 3) / np.sqrt(3)).sum(axis=(1, 2))


def _ops(model) -> Counter:
    return Counter(n.op_type for n in model.graph.node if n.op_type != "Constant")


def _run(model, x):
    return ReferenceEvaluator(model).run(None, {"X": x})[0]


def test_a_shape_chain_comes_back_as_itself():
    model = _chain()
    imported = import_model(model)
    written = to_onnx(imported.outputs, output_names=imported.output_names, opset=18)
    assert _ops(written) == _ops(model)  # Shape x5, Gather, Concat, Size, Range, Sqrt...
    assert not [t for t in written.graph.initializer if t.data_type == TensorProto.INT64]
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(written, x), _expected(x), rtol=1e-5)


def test_a_rule_rewriting_the_reader_drops_the_chain_and_stays_correct():
    """`x * 1 => x` removes the Mul reading the ones ConstantOfShape made: that node is not
    written; the Shape it read stays, for the Size that reads it too."""
    model = _chain()
    imported = import_model(model)
    done = ng.rewrite(imported.outputs, ng.parse_rules("rule one: x * 1 => x\n", "t.rules"))
    assert done.fired() == {"one": 1}
    written = to_onnx(done.outputs, output_names=imported.output_names, opset=18)
    assert _ops(model) - _ops(written) == Counter({"Mul": 1, "ConstantOfShape": 1})
    assert _ops(written) - _ops(model) == Counter()
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(written, x), _expected(x), rtol=1e-5)


def test_a_reshape_target_with_zero_and_minus_one_is_matched_where_it_is_read():
    """The exporter writes a Reshape's target resolved ([2, 6, 2]); the model's own
    [0, -1, 2], computed by Concat, resolves to it on the Reshape's input: written back."""
    nodes = [
        helper.make_node("Relu", ["X"], ["R"]),
        _const("Zero", [0]),
        helper.make_node("Shape", ["R"], ["Last"], start=-1),
        helper.make_node("Neg", ["Last"], ["MinusLast"]),
        helper.make_node("Div", ["MinusLast", "Last"], ["MinusOne"]),
        _const("Two", [2]),
        helper.make_node("Concat", ["Zero", "MinusOne", "Two"], ["Target"], axis=0),
        helper.make_node("Reshape", ["R", "Target"], ["Y"]),
    ]
    model = _model(nodes, [("X", [2, 3, 4])], [2, 6, 2])
    imported = import_model(model)
    written = to_onnx(imported.outputs, output_names=imported.output_names, opset=18)
    assert _ops(written) == _ops(model)
    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(written, x), np.maximum(x, 0).reshape(2, 6, 2))


def test_the_recipes_of_one_import_are_not_written_into_another():
    """Placeholders of equal name and shape are one node (interned): a second import of a
    model without the chain takes none of the first one's nodes."""
    import_model(_chain())
    plain = _model([helper.make_node("Relu", ["X"], ["Y"])], [("X", [2, 3, 4])], [2, 3, 4])
    imported = import_model(plain)
    written = to_onnx(imported.outputs, output_names=imported.output_names, opset=18)
    assert _ops(written) == Counter({"Relu": 1})


def test_a_flatten_read_broadcast_comes_back_a_flatten():
    """ONNX's expanded layer norm over every axis adds Flatten(B, axis=0), of shape (1, n), to
    a (1, n) value: the layout would write it as a Reshape to (n,) (broadcasting needs no
    leading 1); the model's Flatten keeps its leading 1 and comes back as itself."""
    nodes = [helper.make_node("Flatten", ["X"], ["X2D"], axis=0),
             helper.make_node("Flatten", ["W"], ["W2D"], axis=0),
             helper.make_node("Mul", ["X2D", "W2D"], ["Scaled"]),
             helper.make_node("Flatten", ["B"], ["B2D"], axis=0),
             helper.make_node("Add", ["Scaled", "B2D"], ["Y"])]
    model = _model(nodes, [("X", [2, 3, 4]), ("W", [2, 3, 4]), ("B", [2, 3, 4])], [1, 24])
    imported = import_model(model)
    written = to_onnx(imported.outputs, output_names=imported.output_names, opset=18)
    assert _ops(written) == Counter({"Flatten": 3, "Mul": 1, "Add": 1})
    x, w, b = np.random.default_rng(3).standard_normal((3, 2, 3, 4)).astype(np.float32)
    got = ReferenceEvaluator(written).run(None, {"X": x, "W": w, "B": b})[0]
    np.testing.assert_allclose(got, (x * w + b).reshape(1, 24), rtol=1e-6)


def test_a_zero_pad_cast_like_the_input_comes_back():
    """A causal convolution's left padding: zeros of a shape computed from the input, cast
    like it (CastLike reads the input for its type alone), joined in front of it."""
    nodes = [helper.make_node("Shape", ["X"], ["Lead"], start=0, end=2),
             _const("Two", [2]),
             helper.make_node("Concat", ["Lead", "Two"], ["PadShape"], axis=0),
             helper.make_node("ConstantOfShape", ["PadShape"], ["Pad"]),
             helper.make_node("CastLike", ["Pad", "X"], ["PadX"]),
             helper.make_node("Concat", ["PadX", "X"], ["Y"], axis=2)]
    model = _model(nodes, [("X", [2, 3, 4])], [2, 3, 6])
    imported = import_model(model)
    written = to_onnx(imported.outputs, output_names=imported.output_names, opset=18)
    assert _ops(written) == _ops(model)
    x = np.random.default_rng(4).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(written, x), np.concatenate([np.zeros((2, 3, 2)), x], 2))


def test_a_rewrite_that_folds_constants_writes_the_folded_values_not_the_chain():
    """`fold_constants` (which every shipped pipeline runs) makes shape values constants on
    purpose: after it, the chain is not written back (as onnxsim folds it), the numbers stay."""
    model = _chain()
    imported = import_model(model)
    rewritten = ng.rewrite(imported.outputs, ng.parse_rules("pipeline p: fold_constants"),
                           pipeline="p")
    written = to_onnx(rewritten.outputs, output_names=imported.output_names, opset=18)
    ops = _ops(written)
    assert not ops["Shape"] and not ops["Size"] and not ops["Range"], ops
    assert sum(ops.values()) < sum(_ops(model).values())
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(written, x), _expected(x), rtol=1e-5)
    again = import_model(model)  # a new import of the model keeps its records again
    round_trip = to_onnx(again.outputs, output_names=again.output_names, opset=18)
    assert _ops(round_trip) == _ops(model)
