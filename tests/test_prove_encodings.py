"""The prover's encodings of tensor ops agree with their numpy kernels, prove right rules, never
prove wrong mutants of them; a solver's counterexample under the tolerance is widened, not
dropped."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ngrules as ng
from ngrules.ir.executor import Program

z3 = pytest.importorskip("z3")

from helpers import draw_op_instance  # noqa: E402

from ngrules.verification.prove import prove_rule  # noqa: E402
from ngrules.verification.prove.prover import _instances, prove_instance  # noqa: E402
from ngrules.verification.prove.tensors import NoEncoding, evaluate  # noqa: E402


def _numbers(outputs, feeds) -> list[np.ndarray]:
    """The encoded outputs with the feeds substituted for the inputs, as floats."""
    inputs: dict = {}
    terms = evaluate(outputs, inputs)
    pairs = [(sym.v, z3.RealVal(float(feeds[node][idx])))
             for node, arr in inputs.items() for idx in np.ndindex(arr.shape)
             for sym in [arr[idx]]]
    out = []
    for arr in terms:
        got = np.empty(arr.shape)
        for idx in np.ndindex(arr.shape):
            value = z3.simplify(z3.substitute(arr[idx].v, *pairs))
            got[idx] = float(value.as_fraction())
        out.append(got)
    return out


@pytest.mark.parametrize("op", ["Pad", "Argmax", "Argmin", "Pooling", "Convolution"])
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_an_encoding_computes_what_the_kernel_computes(op, data):
    node, outputs, feeds = draw_op_instance(data, op, np.float64)
    feeds = {n: np.round(v * 8) / 8 for n, v in feeds.items()}  # exact in floats and reals
    want = Program(outputs).run(feeds)
    for got, expected in zip(_numbers(outputs, feeds), want):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def rule(text: str):
    return ng.parse_rules(text, "p.rules").rules[0]


DECLARED = "op SiluProbe(x) = x * Sigmoid(x)\n"


@pytest.mark.parametrize("text", [
    "rule r: Erf(-x) => -Erf(x)",
    "rule r: Power(x, 3) => x * x * x",
    "rule r: Power(x, -1) => Reciprocal(x)",
    DECLARED + "rule r: x * Sigmoid(x) => SiluProbe(x)",  # the body is the op's encoding
])
def test_right_rules_of_the_new_encodings_are_proved_over_the_reals(text):
    v = prove_rule(ng.parse_rules(text, "p.rules").rules[0])
    assert v.status == "proved-reals", str(v)
    assert "over the reals" in str(v)


@pytest.mark.parametrize("text", [
    "rule r: Erf(-x) => Erf(x)",
    "rule r: Power(x, 3) => x * x",
    "rule r: Log(Power(a, b)) => b * Log(a)",  # without `assume a > 0`: a = -2, b = 2
    "rule r: c @ Cast(x) => cast(x + 0.5, c.dtype)",
    DECLARED + "rule r: x * Sigmoid(-x) => SiluProbe(x)",
])
def test_wrong_mutants_are_never_proved(text):
    v = prove_rule(ng.parse_rules(text, "p.rules").rules[0])
    assert v.status not in ("proved", "proved-reals"), str(v)


BATCHNORM_FPROP_BETA_SUBTRACTED = """
rule r:
    y @ Broadcast(gamma) * (xc * Broadcast(Reciprocal(Sqrt(var + Broadcast(eps: Constant)))))
        - Broadcast(beta),
    mean,
    var
    where var = Sum(Square(xc)) / m
    where xc = x - Broadcast(mean)
    where mean = Sum(x) / m
    where m = Broadcast(count: Constant)
    if len(x.axes) > 1 and mean.axes == x.axes[:1] and count.rank == 0 and eps.rank == 0
    if value(count) * size(mean) == size(x)
    if gamma.axes == mean.axes and beta.axes == mean.axes
    => BatchnormFprop(x, gamma, beta, eps=value(eps))
"""


def test_a_mutant_of_the_library_batchnorm_fold_is_not_proved():
    v = prove_rule(rule(BATCHNORM_FPROP_BETA_SUBTRACTED), bound=2)
    assert v.status == "wrong", str(v)


def test_a_cast_that_rounds_or_integer_arithmetic_has_no_encoding():
    x = ng.placeholder([], dtype=np.float64, name="x")
    with pytest.raises(NoEncoding, match="rounds"):
        evaluate([ng.cast(x, np.float32)], {})
    i = ng.placeholder([], dtype=np.int32, name="i")
    with pytest.raises(NoEncoding, match="int32"):
        evaluate([i + i], {})


def test_a_counterexample_under_the_tolerance_is_widened_not_dropped():
    r = rule("rule r: Minimum(x, 2e6) => x")
    outcomes = [prove_instance(i) for i in _instances(r, 3, 2)]
    assert outcomes and all(o.status == "wrong" for o in outcomes), outcomes
    cx = outcomes[0].counterexample
    assert "found by z3" in cx.problem
    assert prove_rule(r).status == "wrong"
