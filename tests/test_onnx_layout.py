"""Laws of the exporter's layouts, on random instances of every exportable op: whatever order
each value is written in, onnxruntime computes the executor's values (in the outputs' own
order); operands reached through reorderings and broadcasts cost no Expand; and a value read in
its own order is written with no Transpose."""

from collections import Counter

import numpy as np
import pytest
from helpers import Leaves, random_feeds, single_outputs, tolerance
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ngrules as ng

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ngrules.interop.onnx.exporter import exportable_ops  # noqa: E402

#: Ops whose random instances the exporter cannot write, with why.
NOT_WRITTEN = {
    "Unslice": "steps above 1 have no ONNX Pad",
    "Argmax": "ONNX ArgMax takes one axis; instances reduce several",
    "Argmin": "ONNX ArgMin takes one axis; instances reduce several",
    "BitCast": "ONNX's BitCast is from opset 26; the exporter writes opsets 17 to 23",
}
OPS = sorted(op for op in exportable_ops() if op in ng.OPS and op not in NOT_WRITTEN
             and not ng.OPS[op].has("multi_output"))


class Relaid(Leaves):
    """Leaves held in another order behind a ReorderAxes (a view the exporter must see
    through), so every op meets operands in orders other than their own."""

    def __init__(self, dtype, draw):
        super().__init__(dtype)
        self.draw = draw

    def __call__(self, axes):
        axes = ng.make_axes(axes)
        stored = self.draw(st.permutations(list(axes)))
        return ng.axes_with_order(super().__call__(stored), axes)


def run_ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})


@pytest.mark.parametrize("op", OPS)
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_op_written_in_any_layout_computes_the_executors_values(op, data):
    node = ng.OPS[op].gen(data.draw, Relaid(np.float32, data.draw))
    if op == "BitShift":  # ONNX's BitShift shifts unsigned integers only (signed: refused)
        assume(np.issubdtype(node.dtype, np.unsignedinteger))
    outputs = single_outputs(node)
    feeds = random_feeds(outputs, data.draw(st.integers(0, 2**32 - 1), label="seed"))
    if op == "Gather":  # ONNX's Gather refuses an index out of range, where the op clips it
        index_feeds = {p: v for p, v in feeds.items() if p in ng.toposort([node.args[1]])}
        (index,) = ng.execute([node.args[1]], index_feeds)
        length = node.attrs["axis"].length
        assume(np.all((-length <= index) & (index < length)))
    model = ng.to_onnx(outputs)
    onnx.checker.check_model(model, full_check=True)
    named = {p.attrs["name"]: v for p, v in feeds.items()}
    for got, want in zip(run_ort(model, named), ng.execute(outputs, feeds)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, **tolerance(np.float32))


def test_broadcast_operands_lean_on_onnx_broadcasting():
    n, c, h = (ng.make_axis(k, name=s) for k, s in ((2, "N"), (3, "C"), (4, "H")))
    x = ng.placeholder([n, c, h], name="x")
    bias = ng.constant(np.arange(3, dtype=np.float32), [c])
    y = ng.make_node("Relu", (x + ng.broadcast(bias, [n, c, h]),))
    ops = Counter(nd.op_type for nd in ng.to_onnx([y]).graph.node)
    assert ops == Counter({"Add": 1, "Relu": 1})  # the bias laid out as [C, 1]: no Expand


def test_a_reordering_costs_a_transpose_only_where_an_output_needs_it():
    n, c = ng.make_axis(2, name="N"), ng.make_axis(3, name="C")
    x = ng.placeholder([n, c], name="x")
    flipped = ng.axes_with_order(ng.exp(x), [c, n])
    same = Counter(nd.op_type for nd in ng.to_onnx([ng.axes_with_order(flipped, [n, c])])
                   .graph.node)
    other = Counter(nd.op_type for nd in ng.to_onnx([flipped]).graph.node)
    assert same == Counter({"Exp": 1})
    assert other == Counter({"Exp": 1, "Transpose": 1})


def test_an_output_is_its_node_renamed_not_an_identity():
    n = ng.make_axis(2, name="N")
    x = ng.placeholder([n], name="x")
    model = ng.to_onnx([ng.exp(x), x], output_names=["e", "same"])
    assert [nd.op_type for nd in model.graph.node] == ["Exp", "Identity"]
    assert model.graph.node[0].output[0] == "e"
