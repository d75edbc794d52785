"""ONNX ops kept whole (composites): read as one node of an op of their name, computed through
their body, lowered only by the built-in pass `decompose`, written back as the ONNX node when no
rule changed them. A sample of ONNX's backend node tests (one of each family the importer used
to lower) comes back as the same nodes, at the same opset, with the same input and output names
(bench/onnx_node_identity.py measures all of them)."""

from collections import Counter

import numpy as np
import pytest

import ngrules as ng

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

from ngrules.cli.graphio import written_opset  # noqa: E402
from ngrules.errors import RuleErrors  # noqa: E402
from ngrules.interop.onnx.backend import _array, _feeds, _steering  # noqa: E402
from ngrules.interop.onnx.exporter import to_onnx  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402
from ngrules.ir import composite  # noqa: E402
from ngrules.ir.graph import toposort  # noqa: E402
from ngrules.lang.loader import parse_rules  # noqa: E402

#: One backend node test per family the importer lowered before composites.
SAMPLE = (
    "test_lrn", "test_maxpool_2d_pads", "test_averagepool_2d_pads",
    "test_averagepool_2d_same_upper", "test_layer_normalization_4d_axis1",
    "test_rms_normalization_3d_axis1_epsilon", "test_attention_4d", "test_argmax_keepdims_random",
    "test_gridsample", "test_instancenorm_example", "test_group_normalization_example",
    "test_lppool_2d_pads", "test_softplus", "test_hardsigmoid", "test_celu",
    "test_gemm_all_attributes", "test_reduce_log_sum_exp_do_not_keepdims_random",
    "test_depthtospace_crd_mode_example", "test_cumsum_1d_reverse", "test_einsum_batch_matmul",
    "test_sce_mean_weight", "test_convtranspose_pads", "test_resize_upsample_scales_linear",
)


@pytest.fixture(scope="module")
def cases(onnx_node_cases):
    wanted = set(SAMPLE)
    return {c.name: c for c in onnx_node_cases if c.name in wanted}


def _imported(case):
    values = _feeds(case, case.data_sets[0][0])
    fixed = {k: v for k, v in values.items() if k in _steering(case.model)}
    return import_model(case.model, constants=fixed), values


def _signature(model):
    return [(n.op_type, n.domain, sorted(helper.printable_attribute(a) for a in n.attribute))
            for n in model.graph.node if n.op_type != "Constant"]


@pytest.mark.xdist_group("onnx_node_cases")  # with test_onnx_backend: the cases built once
@pytest.mark.parametrize("name", SAMPLE)
def test_a_node_test_comes_back_as_the_same_nodes_at_its_opset(cases, name):
    case = cases[name]
    imported, values = _imported(case)
    opset = written_opset(None, imported.opset)
    model = to_onnx(imported.outputs, output_names=imported.output_names, opset=opset)
    assert _signature(model) == _signature(case.model)
    assert model.opset_import[0].version == imported.opset  # its own, below 17 too
    assert [o.name for o in model.graph.output] == [o.name for o in case.model.graph.output]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    wanted = [i.name for i in session.get_inputs()]
    assert wanted == [i.name for i in case.model.graph.input if i.name in wanted]
    got = session.run(None, {k: values[k] for k in wanted})
    for g, e in zip(got, case.data_sets[0][1]):
        np.testing.assert_allclose(g, _array(e), rtol=1e-3, atol=1e-5)


def _lrn_pool_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 6, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 3, 3])
    nodes = [helper.make_node("LRN", ["x"], ["t"], size=3, alpha=2e-4),
             helper.make_node("MaxPool", ["t"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 0, 0])]
    graph = helper.make_graph(nodes, "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_composite_computes_through_its_body_and_decompose_lowers_it():
    """LRN and a padded MaxPool are one node each, computed (by the executor and autodiff)
    through their bodies; `decompose_LRN` lowers only the LRN, `decompose` both; written with
    no rule changing the bodies, they are the two ONNX nodes again."""
    model = _lrn_pool_model()
    imported = import_model(model)
    (y,) = imported.outputs
    assert [n.op for n in toposort([y]) if n.args] == ["LRN", "MaxPool"]
    x = np.random.default_rng(0).standard_normal((1, 5, 6, 6)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(ng.execute([y], {"x": x})[0], want, rtol=1e-5, atol=1e-6)
    one = composite.decompose([y], ["LRN"])[0]
    ops = Counter(n.op for n in toposort([one]))
    assert ops["MaxPool"] == 1 and not ops["LRN"] and ops["Dot"] == 1, ops
    both = composite.decompose([y])[0]
    assert not {"LRN", "MaxPool"} & {n.op for n in toposort([both])}
    np.testing.assert_allclose(ng.execute([both], {"x": x})[0], want, rtol=1e-5, atol=1e-6)
    for lowered in (one, both):
        written = to_onnx([lowered], output_names=["y"])
        assert [n.op_type for n in written.graph.node] == ["LRN", "MaxPool"]
    dx = ng.deriv(ng.sum(y, out_axes=()), imported.inputs["x"])
    assert dx.axes == imported.inputs["x"].axes


def test_a_rule_can_match_the_onnx_op_or_after_decompose_its_primitives(tmp_path):
    """A rule over `LRN(x)` fires on the node read whole; a pipeline that decomposes first
    sees primitives instead, and the body it did not change goes out as LRN again."""
    model = _lrn_pool_model()
    imported = import_model(model)
    path = tmp_path / "lrn.rules"
    path.write_text("pass drop_lrn\nrule drop_lrn: n @ LRN(x) => axes_with_order(x, n.axes)\n"
                    "pipeline lowered: decompose, drop_lrn\n")
    rules = ng.load_rules(str(path))
    dropped = ng.rewrite(imported.outputs, rules, passes=["drop_lrn"]).outputs
    assert [n.op_type for n in to_onnx(dropped).graph.node] == ["MaxPool"]
    kept = ng.rewrite(imported.outputs, rules, pipeline="lowered").outputs
    assert "LRN" not in {n.op for n in toposort(kept)}
    assert [n.op_type for n in to_onnx(kept).graph.node] == ["LRN", "MaxPool"]


def test_an_older_opset_is_converted_or_the_body_written():
    """A composite read at opset 17 written at opset 18 (ReduceSumSquare: axes an input from
    18): where onnx's version converter gives no single node, its body is written; the values
    agree either way."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    node = helper.make_node("ReduceSumSquare", ["x"], ["y"], axes=[1], keepdims=0)
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    imported = import_model(model)
    assert imported.outputs[0].op == "ReduceSumSquare"
    written = to_onnx(imported.outputs, output_names=["y"], opset=18)
    assert [n.op_type for n in written.graph.node] in (["ReduceSumSquare"], ["Mul", "ReduceSum"])
    a = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    got = ort.InferenceSession(written.SerializeToString()).run(None, {"x": a})[0]
    np.testing.assert_allclose(got, (a * a).sum(1), rtol=1e-5)


def test_the_decompose_passes_are_built_in():
    """A pipeline may name `decompose` and `decompose_<Op>`; a rules file may not declare them."""
    from ngrules.errors import RuleErrors

    rules = _load_text("pass p1\nrule r: x * 1 => x\npipeline p: decompose, decompose_LRN, p1\n")
    assert list(rules.pipelines["p"]) == ["decompose", "decompose_LRN", "p1"]
    with pytest.raises(RuleErrors, match="built in"):
        _load_text("pass decompose\nrule r: x * 1 => x\n")


def test_decompose_passes_in_a_row_lower_in_one_walk_as_they_would_in_turn(monkeypatch):
    """`decompose_simple, decompose_LRN, decompose_MaxPool` run as one walk, each composite's
    body built once (not again after the LRN under the MaxPool is lowered), and give the graph
    the three passes give one after another; a pass of rules between them splits the run."""
    from ngrules.engine.passes import Lowering, steps

    (y,) = import_model(_lrn_pool_model()).outputs
    names = ["decompose_simple", "decompose_LRN", "decompose_MaxPool"]
    in_turn = [y]
    for name in names:
        in_turn = composite.decompose(in_turn, composite.pass_ops(name))
    rules = _load_text("pass p1\nrule r: x * 1 => x\n")
    (step,) = steps(names, rules)
    assert isinstance(step, Lowering) and step.ops == ["simple", "LRN", "MaxPool"]
    assert len(steps([names[0], "p1", names[1]], rules)) == 3
    built, body = [], composite.body
    monkeypatch.setattr(composite, "body", lambda *a: built.append(a[0].op) or body(*a))
    got = ng.rewrite([y], rules, passes=names).outputs
    assert _text(got) == _text(in_turn)  # the same graph (a body's fresh axes named anew)
    assert sorted(built) == ["LRN", "MaxPool"]


def test_a_spec_kept_as_made_is_the_graph_its_text_parses_to():
    """The importer keeps each composite's spec graph as it made it (decompose then parses no
    text): it must be what the text, which a graph file carries, parses to."""
    from google.protobuf import text_format

    from ngrules.interop.onnx.composites import specs as kept_specs

    (y,) = import_model(_lrn_pool_model()).outputs  # LRN's alpha: a float attribute
    specs = {n.attrs["spec"] for n in toposort([y]) if "spec" in n.attrs}
    assert len(specs) == 2
    for text in specs:
        kept = kept_specs.SPECS[text]
        assert kept == text_format.Parse(text, type(kept)())


def test_computing_stops_at_its_limit_and_agrees_with_the_full_walk():
    """`computing` with a limit gives the first nodes of the full walk: what the importer and
    `simple` ask (is there one, are there two) is answered without walking a body that reads
    past its arguments up to the graph's inputs."""
    x = ng.placeholder([ng.make_axis(4, "N")], name="x")
    chain = x
    for _ in range(50):
        chain = ng.exp(chain)
    full = composite.computing(chain, [])
    assert len(full) == 50
    assert composite.computing(chain, [], limit=1) == full[:1]
    assert composite.computing(chain, [], limit=2) == full[:2]
    assert not composite.simple(chain, []) and composite.simple(ng.exp(x), [])
    assert composite.computing(chain, [chain.args[0]], limit=2) == [chain]


def test_nodes_of_one_spec_print_its_text_once(monkeypatch):
    """Two LRN nodes of the same attributes and shapes share their spec: its text is printed
    once (then found by the graph's bytes) and is what protobuf prints for it."""
    from google.protobuf import text_format

    from ngrules.interop.onnx.composites import specs as kept_specs

    xs = [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [1, 5, 6, 6]) for i in "01"]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 6, 6])
    nodes = [*(helper.make_node("LRN", [f"x{i}"], [f"t{i}"], size=3, alpha=3e-4) for i in "01"),
             helper.make_node("Add", ["t0", "t1"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", xs, [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    printed = []
    real = text_format.MessageToString
    monkeypatch.setattr(text_format, "MessageToString",
                        lambda *a, **k: printed.append(1) or real(*a, **k))
    monkeypatch.setattr(kept_specs, "_TEXTS", {})
    (out,) = import_model(model).outputs
    texts = [n.attrs["spec"] for n in toposort([out]) if "spec" in n.attrs]
    assert len(texts) == 2 and texts[0] == texts[1] and len(printed) == 1
    graph = kept_specs.graph_of(texts[0])
    assert texts[0] == real(graph, as_one_line=True)


def _text(outputs) -> str:
    """The graph's text, its fresh axes (`tmp<n>`) numbered in order of appearance."""
    import re

    from ngrules.ir.graph import format_graph

    names: dict[str, str] = {}
    return re.sub(r"tmp\d+", lambda m: names.setdefault(m[0], f"tmp{len(names)}"),
                  format_graph(outputs))


def _load_text(text):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.rules"
        path.write_text(text)
        return ng.load_rules(str(path))


def test_a_graph_file_of_composites_loads_in_a_fresh_process(tmp_path):
    """`ngrules apply model.onnx -o g.json`, then `apply g.json -o back.onnx` in another
    process (which never imported an ONNX model): the LRN and MaxPool come back as themselves."""
    import subprocess
    import sys

    onnx.save(_lrn_pool_model(), str(tmp_path / "m.onnx"))
    imported = import_model(str(tmp_path / "m.onnx"))
    ng.save_graph(tmp_path / "g.json", imported.outputs)
    code = ("import sys; from ngrules.cli.main import main; "
            "sys.exit(main(['apply', 'g.json', '-o', 'back.onnx']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    back = onnx.load(str(tmp_path / "back.onnx"))
    assert [n.op_type for n in back.graph.node] == ["LRN", "MaxPool"]


def test_the_ops_a_model_brought_are_never_suggested_for_a_misspelt_op(scratch_ops):
    """A composite read from a model (`LRN`, `Tan`) is an op, but "did you mean" offers only
    the ops a rule author can count on: a full test run once suggested 'Tan' for 'Tahn' after
    some earlier test had imported a model with a Tan node."""
    import_model(_lrn_pool_model())
    assert "LRN" in ng.OPS and composite.is_composite("LRN")
    with pytest.raises(ng.OpError, match=r"unknown op 'LRM'$"):
        ng.make_node("LRM", (ng.placeholder({"A": 2}, name="x"),))
    with pytest.raises(RuleErrors) as caught:
        parse_rules("rule r: LRM(x) => x\n", "c.rules")
    assert "unknown op 'LRM'" in str(caught.value) and "LRN" not in str(caught.value)
