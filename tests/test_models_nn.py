"""The three models with sigmoid and softmax written from primitives: what the library's
`fuse_nn` and `inference` pipelines fuse in them, with values (and so gradients) unchanged."""

import numpy as np
import pytest
from models import check_all_gradients, cnn, mlp, transformer_block

import ngrules as ng

#: What `fuse_nn` must fire on each model's cost and gradients (reported in issue 12's note).
EXPECTED = {
    "mlp": {"sigmoid_reciprocal": 1, "sigmoid_reciprocal_bprop": 1, "softmax": 1,
            "softmax_bprop": 1, "safelog_softmax": 1},
    "cnn": {"batchnorm_fprop": 1, "batchnorm_bprop": 1, "relu_plain": 1,
            "relu_plain_bprop": 1, "softmax": 1, "softmax_bprop": 1, "safelog_softmax": 1},
    "transformer_block": {"layer_norm": 2, "layer_norm_bprop_residual": 2, "gelu": 1,
                          "softmax": 1, "softmax_bprop": 1},
}  # fmt: skip
FUSED = {
    "mlp": {"Sigmoid", "Softmax"},
    "cnn": {"BatchnormFprop", "BatchnormBprop", "Relu", "ReluBprop", "Softmax"},
    "transformer_block": {"LayerNorm", "LayerNormBprop", "Gelu", "Softmax"},
}


@pytest.fixture(scope="module")
def library():
    return ng.load_library()


def _ops(outputs) -> set:
    return {n.op for n in ng.toposort(outputs)}


@pytest.mark.parametrize("build", [mlp, cnn, transformer_block], ids=lambda b: b.__name__)
def test_fuse_nn_fuses_each_layer_and_keeps_values(build, library):
    model = build(primitives=True)
    check_all_gradients(model.cost, model.feeds, 7)
    outputs = model.outputs()
    res = ng.rewrite(outputs, library, pipeline="fuse_nn", checked=True)
    assert res.stop == "fixpoint"
    fired = res.fired()
    for rule, count in EXPECTED[build.__name__].items():
        assert fired.get(rule) == count, (rule, fired)
    assert FUSED[build.__name__] <= _ops(res.outputs)
    before = ng.execute(outputs, model.feeds)
    for b, a in zip(before, ng.execute(res.outputs, model.feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_inference_folds_the_cnn_batchnorm_into_its_filters(library):
    model = cnn(primitives=True, inference=True)
    res = ng.rewrite([model.cost], library, pipeline="inference", checked=True)
    assert res.fired()["fold_batchnorm_convolution"] == 1
    (conv,) = [n for n in ng.toposort(res.outputs) if n.op == "Convolution"]
    assert conv.args[1].op == "Multiply"  # the filters, scaled per output channel
    centred = [n for n in ng.toposort(res.outputs) if n.op == "Subtract" and n.axes == conv.axes]
    assert centred == []  # no (conv - mean) over the whole feature map any more
    before, after = ng.execute([model.cost], model.feeds), ng.execute(res.outputs, model.feeds)
    np.testing.assert_allclose(after, before, rtol=1e-9)


@pytest.mark.parametrize("pipeline", ["cpu", "fuse_nn"])
def test_the_front_end_cnn_rewrites_with_its_bool_relu_masks(pipeline, library):
    """Autodiff of max(x, 0) multiplies by a bool mask; `x * 1` must not become the mask."""
    model = cnn()
    outputs = model.outputs()
    res = ng.rewrite(outputs, library, pipeline=pipeline, checked=True)
    assert res.stop == "fixpoint"
    assert {"batchnorm_fprop", "batchnorm_bprop"} <= set(res.fired())
    for b, a in zip(ng.execute(outputs, model.feeds), ng.execute(res.outputs, model.feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
