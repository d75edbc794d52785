"""Instances also run in the rule's own narrow dtypes (float32, float16): a rule right in
float64 but wrong in float16 is caught, one its guards keep to float64 is not run there, and
a dtype guard on a cast's node sets that cast's dtype (not the inputs')."""

from __future__ import annotations

import numpy as np

import ngrules as ng
from ngrules.verification.dtypes import DTYPES, TOLERANCES, relaid
from ngrules.verification.instances import guard_hints
from ngrules.verification.verify import verify_rule

EXAMPLES = 8


def _rule(text: str):
    return ng.parse_rules(f"pass p\nrule r: {text}", "t.rules").rules[0]


def test_a_rule_right_in_every_dtype_says_which_it_ran_in():
    verdict = verify_rule(_rule("x * 0.5 => x / 2"), EXAMPLES)
    assert verdict.status == "verified", str(verdict)
    assert "also run in float32, float16" in verdict.headline


def test_a_constant_that_overflows_float16_is_caught_in_float16():
    verdict = verify_rule(_rule("x * 1e-5 => x / 100000"), EXAMPLES)
    assert verdict.status == "wrong", str(verdict)
    assert "results differ in float16" in verdict.counterexample.problem
    assert "instance:" in str(verdict) and "float16" in str(verdict.counterexample)


def test_a_rule_its_guard_keeps_to_float64_is_not_run_in_narrower_dtypes():
    verdict = verify_rule(_rule('x * 1e-5 if x.dtype == "float64" => x / 100000'), EXAMPLES)
    assert verdict.status == "verified", str(verdict)
    assert "also run in" not in verdict.headline


def test_a_float32_rule_runs_in_float32_only_and_overflows_there():
    verdict = verify_rule(_rule('x * 1e-39 if x.dtype == "float32" => x / 1e39'), EXAMPLES)
    assert verdict.status == "wrong", str(verdict)
    assert "results differ" in verdict.counterexample.problem


def test_a_dtype_guard_on_a_cast_sets_the_cast_not_the_inputs():
    hints = guard_hints(_rule('c @ Cast(h @ Cast(x)) if h.dtype == "float16" => x'))
    assert hints.casts == {"h": np.dtype(np.float16)} and hints.dtype is None
    typed = guard_hints(_rule('c @ Cast(h: Cast) if h.dtype == "float16" => c'))
    assert typed.casts == {"h": np.dtype(np.float16)} and typed.dtype is None
    hints = guard_hints(_rule('x + y if x.dtype == "float32" => y + x'))
    assert hints.dtype == np.dtype(np.float32) and not hints.casts


def test_relaying_narrows_leaves_constants_and_casts_of_the_source_dtype_only():
    a = ng.make_axis(2, "a")
    x = ng.placeholder([a], name="x", dtype=np.float64)
    cast = ng.make_node("Cast", (ng.make_node("Cast", (x,), dtype=np.float16),),
                        dtype=np.float64)
    out = cast * ng.constant(3.0, [a], dtype=np.float64)
    (narrow,), memo = relaid([out], np.dtype(np.float64), np.dtype(np.float32))
    assert narrow.dtype == np.float32 and memo[x].dtype == np.float32
    assert memo[cast].args[0].dtype == np.float16  # the float16 cast inside stays


def test_tolerances_are_wider_for_narrower_dtypes():
    assert [str(d) for d in DTYPES] == ["float32", "float16"]
    f32, f16 = TOLERANCES[np.dtype(np.float32)], TOLERANCES[np.dtype(np.float16)]
    assert f32.rtol < f16.rtol and f32.cancellation < f16.cancellation
    assert f16.rtol >= 8 * np.finfo(np.float16).eps and f32.rtol >= 8 * np.finfo(np.float32).eps


def test_an_intermediate_of_the_rewrite_out_of_float16_range_is_out_of_range_not_wrong():
    # (x·y)/z overflows float16 at 300·300 where x·(y/z) does not: out of range, as in float64
    # (the library's batch-norm fold once came back wrong so); a folded constant that does not
    # fit float16 (`x * 90000`: inf before any op) is still wrong
    from ngrules.verification.dtypes import _narrowed
    from ngrules.verification.instances.sampling import rewrite_instance

    a = ng.make_axis(2, "a")
    x, y, z = (ng.placeholder([a], name=n, dtype=np.float64) for n in "xyz")
    half = np.dtype(np.float16)
    inst = rewrite_instance(_rule("x * (y / z) => (x * y) / z"), [x * (y / z)], {})
    narrow = _narrowed(inst, half)
    big = {n: np.full(2, 300.0) for n in (x, y, z)}
    assert narrow is not None and narrow.difference(big) is None
    folded = rewrite_instance(_rule("(x * 300) * 300 => x * 90000"),
                              [(x * ng.constant(300.0, dtype=np.float64)) *
                               ng.constant(300.0, dtype=np.float64)], {})
    found = _narrowed(folded, half).difference({x: np.full(2, 0.5)})
    assert found is not None and "after inf" in found[0]  # 0.5 · inf
