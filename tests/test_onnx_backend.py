"""ONNX's own backend node tests (from the installed onnx package) through import and the numpy
executor; a sample of them also through rewrite (cpu pipeline), export and onnxruntime.

Every node test runs (1,884 with ONNX 1.23; `pytest -s` prints the table per op and the
refusals by reason). A test the importer refuses with `UnsupportedOp` (an op with no converter,
an element type ngrules has no tensor for, a zero-length dimension, a shape that is not static,
an attribute value such as `select_last_index=1`) counts as unsupported; nothing may fail,
whatever its ops (tests with Constant or Shape nodes and the `_expanded` forms included). The
round trip runs on the first two passing tests of each op.
"""

from collections import Counter

import numpy as np
import pytest

import ngrules as ng

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ngrules.interop.onnx.backend import run_node_tests  # noqa: E402
from ngrules.lang.library import load_library  # noqa: E402

#: Round trips that cannot run, with why (onnxruntime's kernels; the opset ngrules exports).
ORT_LIMITS = {
    "test_max_int16": "onnxruntime has no Max kernel for int16",
    "test_max_uint16": "onnxruntime has no Max kernel for uint16",
    "test_min_int16": "onnxruntime has no Min kernel for int16",
    "test_min_uint16": "onnxruntime has no Min kernel for uint16",
    "test_top_k_uint64": "onnxruntime has no TopK kernel for uint64",
    "test_bitshift_right_uint16": "onnxruntime has no Where kernel for uint16",
    **{f"test_bitwise_{op}": "ngrules exports opset 17; ONNX's bitwise ops are from opset 18"
       for op in ("and_i32_2d", "and_i16_3d", "not_2d", "not_3d", "not_4d", "or_i32_2d",
                  "or_i16_4d", "xor_i32_2d", "xor_i16_3d", "and_ui64_bcast_3v1d",
                  "and_ui8_bcast_4v3d", "or_ui64_bcast_3v1d", "or_ui8_bcast_4v3d",
                  "xor_ui64_bcast_3v1d", "xor_ui8_bcast_4v3d")},
    **{f"test_bitcast_{case}": "ngrules exports opset 17; ONNX's BitCast is from opset 26"
       for case in ("float32_to_int32", "int32_to_float32", "float64_to_int64",
                    "int64_to_float64", "uint32_to_int32", "2d_float32_to_int32",
                    "int8_to_uint8", "scalar_float32_to_int32", "uint16_to_int16",
                    "bool_to_uint8")},
}

#: Fewest passing tests: a converter that regresses makes this fail.
MIN_PASSING = 1444


#: One worker builds the node cases and the report once for both tests (`--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("onnx_node_cases")


@pytest.fixture(scope="module")
def cases(onnx_node_cases):
    return [c for c in onnx_node_cases if c.kind == "node"]


@pytest.fixture(scope="module")
def report(cases):
    return run_node_tests(cases=cases)


def test_every_node_test_passes_or_is_refused_for_a_stated_reason(cases, report):
    print("\n" + report.table())
    print("\n".join(f"{n:5d}  {reason}" for reason, n in report.refusals().most_common()))
    assert len(report.outcomes) == len(cases) > 1800  # every test counts: no filter
    failures = {o.name: o.detail for o in report.with_status("fail")}
    assert not failures, failures
    assert len(report.with_status("pass")) >= MIN_PASSING
    stated = ("no converter: ", "not supported", "length 0", "not static")
    unstated = {r: n for r, n in report.refusals().items() if not any(s in r for s in stated)}
    assert not unstated, unstated


def _onnxruntime_agrees(case) -> bool:
    """Whether onnxruntime's run of the test's own model gives its expected outputs (ops kept
    whole are written back as themselves, so the export is no closer than onnxruntime is)."""
    import onnxruntime as ort

    from ngrules.interop.onnx.backend import _array, _compare, _feeds

    inputs, expected = case.data_sets[0]
    try:
        session = ort.InferenceSession(case.model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        wanted = {i.name for i in session.get_inputs()}
        got = session.run(None, {k: v for k, v in _feeds(case, inputs).items() if k in wanted})
        for g, e in zip(got, expected):
            _compare("y", np.asarray(g), _array(e), case.rtol, case.atol)
    except Exception:  # noqa: BLE001  onnxruntime refuses or differs: not a test of ngrules
        return False
    return True


def test_round_trip_through_rewrite_export_and_onnxruntime(cases, report):
    seen: Counter = Counter()
    sample = []
    passed = {o.name for o in report.with_status("pass")}
    for case in cases:
        ops = {n.op_type for n in case.model.graph.node}
        if (case.name in passed and case.name not in ORT_LIMITS and any(seen[o] < 2 for o in ops)
                and _onnxruntime_agrees(case)):
            seen.update(ops)
            sample.append(case)
    rules = load_library()
    report = run_node_tests(cases=sample,
                            transform=lambda outs: ng.rewrite(outs, rules, pipeline="cpu").outputs)
    print("\n" + report.table())
    broken = {o.name: o.detail for o in report.outcomes if o.exported != "pass"}
    assert not broken, broken
    assert len(report.outcomes) >= 90  # two per op: expanded tests cover many ops at once
