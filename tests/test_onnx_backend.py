"""ONNX's own backend node tests (from the installed onnx package) through import and the numpy
executor; a sample of them also through rewrite (cpu pipeline), export and onnxruntime.

Every test whose ops all have converters runs (1,208 of ONNX 1.23's 1,884; the table
below prints per op with `pytest -s`). A test the importer refuses for a documented reason
(an element type ngrules has no tensor for, a zero-length dimension, an attribute value such
as `select_last_index=1`) counts as unsupported; nothing may fail. The round trip runs on the
first two runnable tests of each op, which keeps the file near 20 s on two cores.
"""

from collections import Counter

import pytest

import ngrules as ng

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ngrules.interop.onnx.backend import node_testcases, run_node_tests  # noqa: E402
from ngrules.lang.library import load_library  # noqa: E402

#: Round trips that cannot run, with why (onnxruntime's kernels; the opset ngrules exports).
ORT_LIMITS = {
    "test_max_int16": "onnxruntime has no Max kernel for int16",
    "test_max_uint16": "onnxruntime has no Max kernel for uint16",
    "test_min_int16": "onnxruntime has no Min kernel for int16",
    "test_min_uint16": "onnxruntime has no Min kernel for uint16",
    "test_top_k_uint64": "onnxruntime has no TopK kernel for uint64",
    **{f"test_bitwise_{op}": "ngrules exports opset 17; ONNX's bitwise ops are from opset 18"
       for op in ("and_i32_2d", "and_i16_3d", "not_2d", "not_3d", "not_4d", "or_i32_2d",
                  "or_i16_4d", "xor_i32_2d", "xor_i16_3d", "and_ui64_bcast_3v1d",
                  "and_ui8_bcast_4v3d", "or_ui64_bcast_3v1d", "or_ui8_bcast_4v3d",
                  "xor_ui64_bcast_3v1d", "xor_ui8_bcast_4v3d")},
}

#: Fewest passing tests: a converter that regresses makes this fail.
MIN_PASSING = 900


@pytest.fixture(scope="module")
def cases():
    return [c for c in node_testcases() if c.kind == "node"]


@pytest.fixture(scope="module")
def report(cases):
    return run_node_tests(cases=cases)


def test_every_runnable_node_test_passes_or_is_refused_for_a_stated_reason(report):
    print("\n" + report.table())
    failures = {o.name: o.detail for o in report.with_status("fail")}
    assert not failures, failures
    assert len(report.with_status("pass")) >= MIN_PASSING
    reasons = Counter(o.detail.split(":")[0] for o in report.with_status("unsupported"))
    assert all("not supported" in o.detail or "length 0" in o.detail
               for o in report.with_status("unsupported")), reasons


def test_round_trip_through_rewrite_export_and_onnxruntime(cases, report):
    seen: Counter = Counter()
    sample = []
    passed = {o.name for o in report.with_status("pass")}
    for case in cases:
        ops = {n.op_type for n in case.model.graph.node}
        if case.name in passed and case.name not in ORT_LIMITS and any(seen[o] < 2 for o in ops):
            seen.update(ops)
            sample.append(case)
    rules = load_library()
    report = run_node_tests(cases=sample,
                            transform=lambda outs: ng.rewrite(outs, rules, pipeline="cpu").outputs)
    print("\n" + report.table())
    broken = {o.name: o.detail for o in report.outcomes if o.exported != "pass"}
    assert not broken, broken
    assert len(report.outcomes) >= 100
