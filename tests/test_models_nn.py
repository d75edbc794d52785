"""An MLP and a transformer block built with the front end: forward and backward run,
gradients match finite differences, and the `fuse_nn` pipeline fuses what it should."""

import numpy as np
import pytest

import ngrules as ng
from tests.helpers import central_difference
from tests.models import mlp, transformer_block

#: Fusions each model must get from `fuse_nn` (the closing note of issue 12 reports them).
EXPECTED = {
    "mlp": {
        "batchnorm_fprop": 1, "batchnorm_bprop": 1, "relu_fprop": 1, "relu_bprop": 1,
        "sigmoid": 1, "sigmoid_bprop": 1, "softmax": 1, "safelog_softmax": 1,
    },
    "transformer_block": {"layer_norm": 2, "softmax": 1, "gelu": 1},
}


@pytest.fixture(scope="module")
def library():
    return ng.load_library()


@pytest.mark.parametrize("build", [mlp, transformer_block], ids=lambda b: b.__name__)
def test_gradients_match_finite_differences(build):
    model = build()
    grads = ng.execute([ng.deriv(model.cost, p) for p in model.params], model.feeds)
    program = ng.compile_graph([model.cost])
    for param, grad in zip(model.params, grads):
        def cost_at(value, param=param):
            return program.run({**model.feeds, param: value})[0].item()

        fd = central_difference(cost_at, model.feeds[param])
        np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7, err_msg=param.name)


@pytest.mark.parametrize("build", [mlp, transformer_block], ids=lambda b: b.__name__)
def test_fuse_nn_fuses_each_layer_and_keeps_values(build, library):
    model = build()
    outputs = model.outputs()
    res = ng.rewrite(outputs, library, pipeline="fuse_nn", checked=True)
    assert res.stop == "fixpoint"
    fired = res.fired()
    for rule, count in EXPECTED[build.__name__].items():
        assert fired.get(rule) == count, (rule, fired)
    after_values = ng.execute(res.outputs, model.feeds)
    for before, after in zip(ng.execute(outputs, model.feeds), after_values):
        np.testing.assert_allclose(after, before, rtol=1e-9, atol=1e-12)
