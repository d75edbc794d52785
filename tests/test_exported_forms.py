"""The ten commonest forms of an exported transformer (docs/exported-forms.md): each real torch
export of tests/data/exported_forms (bench/export_forms.py) is imported and rewritten with the
rules of docs/examples/exported_forms.rules as a user would run them, with no pipeline (the
file declares none): the rules read the import as written by default (`engine.reading`), the
form's rule fires, its declared op is in the graph, and the values are onnxruntime's."""

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import ngrules as ng

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ngrules.interop.onnx.exporter import to_onnx  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "exported_forms"
RULES = ROOT / "docs" / "examples" / "exported_forms.rules"

#: form -> (the rule that fuses it, the declared op it leaves in the graph).
FORMS = {
    "gelu": ("gelu_exact", "GeluExact"),
    "gelu_dynamo": ("gelu_exact_dynamo", "GeluExact"),
    "silu": ("silu", "SiLU"),
    "silu_conv": ("silu", "SiLU"),
    "rmsnorm": ("rms_norm", "RmsNorm"),
    "rmsnorm_dynamo": ("rms_norm_dynamo", "RmsNorm"),
    "layernorm": ("layer_norm", "LayerNormAffine"),
    "attention_mask": ("masked_attention", "MaskedAttention"),
    "rotary": ("rotary", "Rotary"),
    "bias_gelu": ("bias_gelu", "BiasGelu"),
    "residual_norm": ("residual_norm", "ResidualLayerNorm"),
    "gqa": ("grouped_attention", "ScaledAttention"),
    "causal_mask": ("causal_softmax", "MaskedSoftmax"),
}
#: The exports whose rule matches only with the layout laid out canonically: the SiLU of a
#: convolution's output (each operand reordered) and the keep-dims mean of RMSNorm.
NEED_CANONICAL = {"silu_conv", "rmsnorm", "rmsnorm_dynamo"}


@pytest.fixture(scope="module")
def rules():
    return ng.load_rules(RULES)


def _import(form):
    model = onnx.load(str(DATA / f"{form}.onnx"))
    return model, import_model(model)


def _feeds(model, seed=0):
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal([d.dim_value for d in v.type.tensor_type.shape.dim])
            .astype(np.float32) for v in model.graph.input}


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_rule_fuses_the_real_export_and_values_stay(form, rules):
    """As written, by default: no pipeline, no `decompose`, no `canonical_layout`."""
    assert not rules.pipelines
    rule, op = FORMS[form]
    model, imported = _import(form)
    done = ng.rewrite(imported.outputs, rules)
    assert rule in {f.rule for f in done.trace}, done.fired()
    assert op in {n.op for n in ng.toposort(done.outputs)}
    feeds = _feeds(model)
    got = ng.execute(done.outputs, feeds)[0]
    np.testing.assert_allclose(got, _ort(model, feeds), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("form", ["silu_conv", "rmsnorm_dynamo", "bias_gelu"])
def test_apply_on_the_command_line_fuses_the_export_as_written(form, tmp_path, capsys):
    """`ngrules apply model.onnx --rules my.rules -o out.onnx`: the rule fires, the model
    written runs in onnxruntime with the original's values; what no rule changed is written
    back as the ONNX node it was read from (bias_gelu's MatMul, silu_conv's Conv)."""
    from ngrules.cli.main import main

    out = tmp_path / "out.onnx"
    assert main(["apply", str(DATA / f"{form}.onnx"), "--rules", str(RULES), "-o", str(out)]) == 0
    assert f" {FORMS[form][0]} " in capsys.readouterr().out
    model, written = onnx.load(str(DATA / f"{form}.onnx")), onnx.load(str(out))
    ops = {n.op_type for n in written.graph.node}
    assert FORMS[form][1] in ops and ops & {"MatMul", "Conv"} == ops & {"MatMul", "Conv", "Mul"}
    feeds = _feeds(model, 3)
    np.testing.assert_allclose(_ort(written, feeds), _ort(model, feeds), rtol=1e-5, atol=1e-5)


def test_what_needs_the_canonical_form(rules):
    """docs/exported-forms.md's table: with the ONNX ops lowered (`decompose`) but without
    `canonical_layout`, only these miss; explicit pipelines run exactly what they name."""
    missed = {form for form, (rule, _) in FORMS.items()
              if rule not in ng.rewrite(_import(form)[1].outputs, rules,
                                        passes=["decompose", "forms", "composites"]).fired()}
    assert missed == NEED_CANONICAL


#: A rule that reads into most composites of the exports (`Mul`, `Div`, `Pow`, `MatMul`,
#: `ReduceMean`, `Reshape`, `LayerNormalization`) and matches none of them.
NEVER = """
pass never
rule never: Sum(Flatten(x) / Sigmoid(Erf(x)) * Sqrt(y)) => x
"""


@pytest.mark.parametrize("form", sorted(FORMS))
def test_rules_that_fire_nowhere_leave_the_round_trip_as_it_was(form):
    """The default lowering is kept only by a pass in which a rule fired: rules that match
    nothing give back the import's own nodes, so the model written is the one written with
    no rule (issue 34's identity)."""
    from ngrules.engine.reading import as_read

    model, imported = _import(form)
    never = ng.parse_rules(NEVER, "never.rules")
    read = as_read(imported.outputs, never.rules)  # the rule reads into the import's ONNX ops
    assert (form == "causal_mask") == all(a is b for a, b in zip(read, imported.outputs))
    done = ng.rewrite(imported.outputs, never)
    assert done.fired() == {} and all(a is b for a, b in zip(done.outputs, imported.outputs))
    ops = [Counter(n.op_type for n in to_onnx(g, opset=17).graph.node)
           for g in (imported.outputs, done.outputs)]
    assert ops[0] == ops[1]


def test_the_docs_page_shows_the_rules_as_the_file_has_them():
    """docs/exported-forms.md quotes every rule of the file verbatim (one source of truth)."""
    import re

    page = (ROOT / "docs" / "exported-forms.md").read_text(encoding="utf-8")
    text = RULES.read_text(encoding="utf-8")
    quoted = re.findall(r"^rule (\w+).*?(?=^\S|\Z)", text, re.S | re.M)
    assert sorted(quoted) == sorted({rule for rule, _ in FORMS.values()})
    for block in re.finditer(r"^rule (\w+).*?(?=^\S|\Z)", text, re.S | re.M):
        assert block.group(0).rstrip() in page, block.group(1)


@pytest.mark.parametrize("position", [0, 1, 2])
def test_rotary_on_other_layouts(position, rules):
    """`ngrules verify` builds no instance of `rotary` (x both whole and sliced twice), so the
    rule is checked here on hand-built graphs: each axis rotated in turn, cos and sin on fewer
    axes, against numpy's rotate_half."""
    axes = [ng.make_axis(n, name) for n, name in ((4, "A"), (6, "B"), (2, "C"))]
    x = ng.placeholder(axes, name="x")
    rot = axes[position]
    h = rot.length // 2
    cos = ng.placeholder([a for a in axes if a in (axes[1], rot)], name="cos")
    sin = ng.placeholder(cos.axes, name="sin")
    hi = ng.make_node("Slice", (x,), position=position, start=h, stop=2 * h,
                      axis=ng.make_axis(h, "hi"))
    lo = ng.make_node("Slice", (x,), position=position, start=0, stop=h,
                      axis=ng.make_axis(h, "lo"))
    cat = ng.make_node("Concat", (ng.negative(hi), lo), axis=rot, position=position)
    out = x * ng.broadcast(cos, axes) + cat * ng.broadcast(sin, axes)
    done = ng.rewrite([out], rules)
    assert done.fired() == {"rotary": 1}
    rng = np.random.default_rng(position)
    feeds = {n.name: rng.standard_normal(n.axes.lengths).astype(np.float32) for n in (x, cos, sin)}
    shape = [a.length if a in cos.axes else 1 for a in axes]
    c, s = (feeds[k].reshape(shape) for k in ("cos", "sin"))
    xv = feeds["x"]
    halves = np.split(xv, 2, axis=position)
    want = xv * c + np.concatenate((-halves[1], halves[0]), axis=position) * s
    np.testing.assert_allclose(ng.execute(done.outputs, feeds)[0], want, rtol=1e-6, atol=1e-6)


def test_a_rule_naming_the_onnx_op_reads_it_whole_beside_rules_reading_primitives(rules):
    """A pass whose patterns name `LayerNormalization` keeps that op whole though another of
    its rules reads `Multiply`, an op of its body; the rule over the op matches the import."""
    text = ("pass mixed\n"
            "rule whole: n @ LayerNormalization(x, g, b) => axes_with_order(x, n.axes)\n"
            "rule silu_too: x * Sigmoid(x) => x\n")
    mixed = ng.parse_rules(text, "mixed.rules")
    done = ng.rewrite(_import("layernorm")[1].outputs, mixed)
    assert done.fired() == {"whole": 1} and done.outputs[0].op == "Placeholder"


@pytest.mark.parametrize("form", ["silu_conv", "rmsnorm", "layernorm"])
def test_saturation_reads_the_export_as_written_too(form, rules):
    """`ng.saturate` with no pipeline puts the graph as the rules read it beside the import in
    the e-graph: the form's rule applies there and the extracted graph keeps the values."""
    model, imported = _import(form)
    done = ng.saturate(imported.outputs, rules, unverified=True, seconds=10)
    assert done.applied.get(FORMS[form][0]) == 1
    assert FORMS[form][1] in {n.op for n in ng.toposort(done.outputs)}
    feeds = _feeds(model, 5)
    got = ng.execute(done.outputs, feeds)[0]
    np.testing.assert_allclose(got, _ort(model, feeds), rtol=1e-5, atol=1e-5)


def test_explain_and_show_read_the_export_as_the_rules_do(capsys):
    """`ngrules explain` finds the match a plain `apply` fires; `show --rules` prints the graph
    it is in (the keep-dims mean laid out: no TensorSlice), `show` alone the import."""
    from ngrules.cli.main import main

    model = str(DATA / "rmsnorm.onnx")
    assert main(["explain", "rms_norm", model, "--rules", str(RULES)]) == 0
    assert "matches at 1 node(s)" in capsys.readouterr().out
    assert main(["show", model, "--rules", str(RULES)]) == 0
    read = capsys.readouterr().out
    assert main(["show", model]) == 0
    imported = capsys.readouterr().out
    assert " Sum(" in read and "TensorSlice" not in read and "ReduceMean(" in imported


def test_what_a_fusion_only_rebuilt_is_written_back_as_its_onnx_op():
    """Downstream of a fused residual layer norm, the ONNX ops the rules read into (lowered for
    them) are only rebuilt on new arguments: they are written back as themselves (the
    attention's Gather, MatMul, ...), so the model written differs from the one written with
    no rule by the fused ops alone."""
    model = onnx.load(str(ROOT / "tests" / "zoo" / "transformer_encoder_legacy_op17.onnx"))
    imported = import_model(model)
    done = ng.rewrite(imported.outputs, ng.load_rules(RULES))
    assert done.fired() == {"layer_norm": 4, "residual_norm": 4}
    ops = [Counter(n.op_type for n in to_onnx(g, opset=17).graph.node)
           for g in (imported.outputs, done.outputs)]
    assert ops[1] - ops[0] == Counter({"ResidualLayerNorm": 4})
    # and the model's Identity giving a LayerNormalization its weight (`recipes`: written back
    # where the op that read it in the model reads it, not under the fused op)
    assert ops[0] - ops[1] == Counter({"LayerNormalization": 4, "Add": 4, "Identity": 1})
