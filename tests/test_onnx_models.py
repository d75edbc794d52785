"""Three real models (MLP, CNN, transformer block) built with onnx.helper: imported, rewritten
by the cpu pipeline, exported, and equal to the originals under onnxruntime."""

from collections import Counter

import numpy as np
import pytest

import ngrules as ng
from ngrules.ir.composite import decompose

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from ngrules.interop.onnx.examples import MODELS  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402
from ngrules.lang.library import load_library  # noqa: E402

#: What the cpu pipeline does to each model today (the fusions for softmax, GELU, layer norm
#: and inference batchnorm come with their rules). The transformer's MatMuls, which nothing
#: before dot_lowering changes, are whole again by then (`recompose`): none is lowered; nor is
#: the CNN's classifier Gemm, though the convolution before it took a batchnorm in (its body is
#: rebuilt on the new convolution, and recomposed all the same). The MLP's Gemms whose weights
#: took a batchnorm in are lowered (and written with its bias); its last is recomposed.
EXPECTED_FIRED = {
    "mlp": {"dot_reorder": 1, "dot_matrix_matrix": 2},
    "cnn": {"fold_batchnorm_convolution": 2},
    "transformer": {},
}


@pytest.fixture(scope="module")
def rules():
    return load_library()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_round_trip_agrees_with_onnxruntime(name, rules):
    build, lengths = MODELS[name]
    model = build()
    onnx.checker.check_model(model, full_check=True)
    imported = import_model(model, lengths=lengths)
    result = ng.rewrite(imported.outputs, rules, pipeline="cpu")
    assert result.stop == "fixpoint"
    fired = result.fired()
    for rule, count in EXPECTED_FIRED[name].items():
        assert fired.get(rule, 0) >= count, fired
    exported = ng.to_onnx(result.outputs, output_names=imported.output_names)
    onnx.checker.check_model(exported, full_check=True)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    shape = [lengths.get(d.dim_param, d.dim_value) for d in dims]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    got = ort.InferenceSession(exported.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    for outputs in (imported.outputs, result.outputs):
        np.testing.assert_allclose(ng.execute(outputs, {"x": x})[0], want, rtol=1e-4, atol=1e-5)
    before, after = len(ng.toposort(imported.outputs)), len(ng.toposort(result.outputs))
    print(f"{name}: {before} -> {after} nodes, fired {dict(fired)}")


def test_the_batch_is_one_axis_across_the_model():
    build, lengths = MODELS["cnn"]
    imported = import_model(build(), lengths=lengths)
    whole = Counter(n.op for n in ng.toposort(imported.outputs))
    assert whole["Conv"] == 2 and whole["MaxPool"] == 2 and whole["Gemm"] == 1  # read whole
    nodes = ng.toposort(decompose(imported.outputs))  # their primitives
    (x,) = [n for n in nodes if n.op == "Placeholder"]
    assert x.axes.names == ("N", "C", "H", "W")
    ops = Counter(n.op for n in nodes)
    assert ops["Convolution"] == 2 and ops["Pooling"] == 2 and ops["Dot"] == 1
    windows = [n for n in nodes if n.op in ("Convolution", "Pooling", "Dot")]
    assert all("N" in n.axes.names for n in windows)
    assert imported.outputs[0].axes.names[0] == "N"
