"""The ten commonest forms of an exported transformer (docs/exported-forms.md): each real torch
export of tests/data/exported_forms (bench/export_forms.py) is imported, put through the
built-in pass canonical_layout and the rules of docs/examples/exported_forms.rules; the form's
rule fires, its declared op is in the graph, and the values are onnxruntime's."""

from pathlib import Path

import numpy as np
import pytest

import ngrules as ng

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

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
#: The exports whose rule matches only after canonical_layout: the SiLU of a convolution's
#: output (each operand reordered) and the keep-dims mean of RMSNorm (both exporters).
NEED_CANONICAL = {"silu_conv", "rmsnorm", "rmsnorm_dynamo"}


@pytest.fixture(scope="module")
def rules():
    return ng.load_rules(RULES)


def _import(form):
    model = onnx.load(str(DATA / f"{form}.onnx"))
    return model, import_model(model)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_rule_fuses_the_real_export_and_values_stay(form, rules):
    rule, op = FORMS[form]
    model, imported = _import(form)
    done = ng.rewrite(imported.outputs, rules, pipeline="exported_forms")
    assert rule in {f.rule for f in done.trace}, done.fired()
    assert op in {n.op for n in ng.toposort(done.outputs)}
    rng = np.random.default_rng(0)
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    got = ng.execute(done.outputs, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_what_needs_the_canonical_form(rules):
    """docs/exported-forms.md's table: without canonical_layout only these miss."""
    missed = {form for form, (rule, _) in FORMS.items()
              if rule not in ng.rewrite(_import(form)[1].outputs, rules,
                                        pipeline="as_written").fired()}
    assert missed == NEED_CANONICAL


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
    done = ng.rewrite([out], rules, pipeline="exported_forms")
    assert done.fired() == {"rotary": 1}
    rng = np.random.default_rng(position)
    feeds = {n.name: rng.standard_normal(n.axes.lengths).astype(np.float32) for n in (x, cos, sin)}
    shape = [a.length if a in cos.axes else 1 for a in axes]
    c, s = (feeds[k].reshape(shape) for k in ("cos", "sin"))
    xv = feeds["x"]
    halves = np.split(xv, 2, axis=position)
    want = xv * c + np.concatenate((-halves[1], halves[0]), axis=position) * s
    np.testing.assert_allclose(ng.execute(done.outputs, feeds)[0], want, rtol=1e-6, atol=1e-6)
