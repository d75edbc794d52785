"""The zoo (tests/zoo/, networks exported from torch): each model imports, goes through every
shipped pipeline, exports, and equals its original under onnxruntime on random inputs.

Every model of the zoo is tested (`python bench/zoo_status.py` prints the same as a table).
"""

import importlib.util
import sys
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ngrules.lang.library import load_library  # noqa: E402

BENCH = Path(__file__).resolve().parent.parent / "bench"


#: What the transformer fusions find in the zoo's transformers (fuse_nn), per model: the erf
#: GELU in the order each exporter writes it, its bias, the residual layer norms, attention.
FUSED = {
    "vit_dynamo_op17": {
        "gelu_erf_half_inside": 2, "bias_gelu_erf": 2, "skip_layer_norm": 5,
        "dot_product_attention": 2,
    },
    "vit_dynamo_op20": {
        "gelu_erf_scaled": 2, "bias_gelu_erf": 2, "skip_layer_norm": 5,
        "dot_product_attention": 2,
    },
    "transformer_encoder_dynamo_op17": {"skip_layer_norm": 4, "dot_product_attention": 2},
    "mlp_dynamic_legacy_op17": {"gelu_erf": 1, "bias_gelu_erf": 1},
    "mlp_dynamic_dynamo_op17": {"gelu_erf_half_inside": 1, "bias_gelu_erf": 1},
}


def _load_stages():
    spec = importlib.util.spec_from_file_location("bench_zoo_stages", BENCH / "zoo_stages.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


zs = _load_stages()


@pytest.fixture(scope="module")
def rules():
    return load_library()


def test_the_zoo_holds_every_family_with_both_exporters():
    names = {p.stem for p in zs.zoo_files()}
    for family in ("resnet", "resnet_bn", "mobilenet_v3", "efficientnet", "shufflenet", "vit",
                   "transformer_encoder", "bert", "gpt2", "lstm", "gru", "mlp_dynamic"):
        assert any(n.startswith(family + "_") for n in names), family
    assert len(names) >= 40


#: Where the output is still larger than the input (more nodes or a Transpose the input did not
#: have), by model family or family and exporter, and pipeline ("*": every one), with why.
#: The test asserts these are still larger, so a fix must strike its entry.
LARGER: dict[tuple[str, str], str] = {}


def _larger_expected(name: str, pipeline) -> bool:
    """Whether LARGER lists the model by family (`bert`), family and exporter
    (`bert_dynamo`) or name (`bert_dynamo_op20`), for every pipeline ("*") or this one."""
    family, exporter = name.rsplit("_", 2)[:2]
    return any((who, when) in LARGER for who in (family, f"{family}_{exporter}", name)
               for when in ("*", pipeline or "no rules"))


#: Ops that a pipeline leaves none of, per model family: `inference` folds every batchnorm
#: into the convolution before it (and its constants into the weights).
GONE = {("resnet_bn", "inference"): "BatchNormalization"}


def _transposes(model) -> int:
    return sum(n.op_type == "Transpose" for n in model.graph.node)


@pytest.mark.parametrize("name", sorted(p.stem for p in zs.zoo_files()))
def test_zoo_model_through_every_pipeline_equals_onnxruntime(name, rules):
    """... and the output has no more ONNX nodes than the input and no Transpose the input did
    not have (issue 21), except where LARGER says why not."""
    model = onnx.load(str(zs.ZOO / f"{name}.onnx"))
    imported = zs.import_zoo_model(model)
    pipelines = sorted(rules.pipelines)
    assert {"cpu", "fuse_nn", "inference"} <= set(pipelines)
    for pipeline in [None, *pipelines]:
        outcome = zs.through_pipeline(model, imported, pipeline, rules)
        assert outcome.ok, f"{name} with {pipeline or 'no rules'}: {outcome.cell()}"
        onnx.checker.check_model(outcome.exported, full_check=True)
        no_larger = (outcome.nodes <= len(model.graph.node)
                     and _transposes(outcome.exported) <= _transposes(model))
        figures = (f"{name} with {pipeline or 'no rules'}: {outcome.nodes} nodes "
                   f"({_transposes(outcome.exported)} Transpose) from {len(model.graph.node)} "
                   f"({_transposes(model)})")
        assert no_larger != _larger_expected(name, pipeline), figures
        gone = GONE.get((name.rsplit("_", 2)[0], pipeline))
        if gone:
            assert gone in {n.op_type for n in model.graph.node}, name
            assert gone not in {n.op_type for n in outcome.exported.graph.node}, figures
            assert outcome.nodes < len(model.graph.node), figures


@pytest.mark.parametrize("name", sorted(FUSED))
def test_the_transformer_fusions_fire_on_the_zoo(name, rules):
    import ngrules as ng

    imported = zs.import_zoo_model(onnx.load(str(zs.ZOO / f"{name}.onnx")))
    fired = ng.rewrite(imported.outputs, rules, pipeline="fuse_nn").fired()
    assert {rule: fired.get(rule, 0) for rule in FUSED[name]} == FUSED[name]
    # the fusion passes alone, no decompose_*: the rules read the ONNX ops they name by default
    fired = ng.rewrite(imported.outputs, rules, passes=["nn_fusion", "transformer_fusion"]).fired()
    assert {rule: fired.get(rule, 0) for rule in FUSED[name]} == FUSED[name]


def test_the_dynamic_batch_model_declares_a_symbolic_batch():
    model = onnx.load(str(zs.ZOO / "mlp_dynamic_legacy_op17.onnx"))
    assert zs.symbolic_lengths(model) == {"batch": zs.SYMBOLIC_LENGTH}
    assert zs.random_feeds(model)["x"].shape == (zs.SYMBOLIC_LENGTH, 16)


def test_a_wrong_export_is_caught_by_the_comparison(rules):
    """The comparison can fail: a model against a changed copy of its export differs."""
    model = onnx.load(str(zs.ZOO / "mlp_dynamic_legacy_op17.onnx"))
    changed = onnx.load(str(zs.ZOO / "mlp_dynamic_legacy_op17.onnx"))
    first = changed.graph.initializer[0]
    array = onnx.numpy_helper.to_array(first) + 1.0
    first.CopyFrom(onnx.numpy_helper.from_array(array, first.name))
    imported = zs.import_zoo_model(changed)
    outcome = zs.through_pipeline(model, imported, None, rules)
    assert outcome.stage == "compare" and "max abs error" in outcome.reason
