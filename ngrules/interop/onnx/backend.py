"""ONNX's own backend node tests run through import and the numpy executor.

`onnx.backend.test.case.node.collect_testcases()` builds every node test of the installed onnx
(a model, input arrays, expected outputs). Every test runs: it passes when each output matches
within the test's tolerances (float32 defaults rtol=1e-3, atol=1e-7, as ONNX's runner uses),
fails on a mismatch or any other error, and counts as unsupported when the importer refuses it
with `UnsupportedOp` (an op with no converter, an element type, an attribute value, a shape
that is not static); `Report.refusals` counts those by reason.

float16 outputs are compared within two float16 steps (rtol 2**-9): the tests' rtol of 1e-3 is
less than one step of the format between 1 and 2, and which way an intermediate float16 result
rounds depends on the order of accumulation, which differs between numpy's kernels and ours.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from ngrules.errors import NgrulesError
from ngrules.interop.onnx import UnsupportedOp
from ngrules.interop.onnx.importer import import_model
from ngrules.ir.executor import execute
from ngrules.ir.graph import toposort


@dataclass
class Outcome:
    name: str
    ops: tuple[str, ...]
    status: str  # "pass", "fail", "unsupported"
    detail: str = ""
    exported: str = ""  # with rules: "pass" or "fail" for import -> rewrite -> export -> ORT


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def by_op(self) -> dict[str, Counter]:
        table: dict[str, Counter] = defaultdict(Counter)
        for o in self.outcomes:
            for op in set(o.ops):
                table[op][o.status] += 1
                table[op]["exported"] += o.exported == "pass"
        return dict(table)

    def with_status(self, status: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == status]

    def table(self) -> str:
        lines = [f"{'op':24s} {'pass':>5s} {'fail':>5s} {'unsup':>5s} {'export':>6s}"]
        rows = sorted(self.by_op().items()) + [("tests", self.totals())]
        for op, c in rows:
            lines.append(f"{op:24s} {c['pass']:5d} {c['fail']:5d} {c['unsupported']:5d} "
                         f"{c['exported']:6d}")
        return "\n".join(lines)

    def refusals(self) -> Counter:
        """Unsupported tests by reason: the op with no converter, or the kind of refusal."""
        return Counter(refusal_reason(o.detail) for o in self.with_status("unsupported"))

    def totals(self) -> Counter:
        total = Counter(o.status for o in self.outcomes)
        total["exported"] = sum(o.exported == "pass" for o in self.outcomes)
        return total


def refusal_reason(detail: str) -> str:
    """A refusal's reason without the names of values and nodes."""
    import re

    if detail.startswith("unsupported ONNX op "):
        return "no converter: " + detail.split()[3]
    detail = re.sub(r"'[^']*'", "X", detail)
    detail = re.sub(r"\(node [^)]*\)|\([^)]*\)", "", detail)
    return re.sub(r"^\w+ node X?:? ?", "", detail).split(";")[0].strip()


def node_testcases():
    """ONNX's node test cases (built in memory by the installed onnx package)."""
    from onnx.backend.test.case.node import collect_testcases

    return collect_testcases()


def model_ops(model) -> tuple[str, ...]:
    ops = [n.op_type for n in model.graph.node]
    for f in model.functions:
        ops += [n.op_type for n in f.node]
    return tuple(ops)


def run_case(case, transform=None) -> Outcome:
    """Import and execute; with `transform` (outputs -> outputs, e.g. a rewrite), also
    transform, export and run the exported model with onnxruntime, against the same expected
    outputs."""
    outcome = _run_imported(case)
    if transform is not None and outcome.status == "pass":
        try:
            _run_exported(case, transform)
            outcome.exported = "pass"
        except Exception as e:  # any failure of the round trip is reported, not raised
            outcome.exported = "fail"
            outcome.detail = f"export: {type(e).__name__}: {str(e).strip()[:200]}"
    return outcome


def _feeds(case, inputs) -> dict[str, np.ndarray]:
    names = [i.name for i in case.model.graph.input
             if i.name not in {t.name for t in case.model.graph.initializer}]
    return dict(zip(names, (_array(v) for v in inputs)))


def _run_exported(case, transform) -> None:
    import onnxruntime as ort

    from ngrules.interop.onnx.exporter import to_onnx

    for inputs, expected in case.data_sets:
        values = _feeds(case, inputs)
        fixed = {k: v for k, v in values.items() if k in _steering(case.model)}
        imported = import_model(case.model, constants=fixed)
        model = to_onnx(transform(imported.outputs), output_names=imported.output_names)
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        wanted = {i.name for i in session.get_inputs()}
        got = session.run(None, {k: v for k, v in values.items() if k in wanted})
        for name, g, e in zip(imported.output_names, got, expected):
            _compare(name, np.asarray(g), _array(e), case.rtol, case.atol)


def _run_imported(case) -> Outcome:
    ops = tuple(n.op_type for n in case.model.graph.node)
    try:
        for inputs, expected in case.data_sets:
            values = _feeds(case, inputs)
            fixed = {k: v for k, v in values.items() if k in _steering(case.model)}
            imported = import_model(case.model, constants=fixed)
            live = {n.name for n in toposort(imported.outputs) if n.op == "Placeholder"}
            feeds = {k: v for k, v in values.items() if k in live}
            got = execute(imported.outputs, feeds)
            for name, g, e in zip(imported.output_names, got, expected):
                _compare(name, g, _array(e), case.rtol, case.atol)
    except UnsupportedOp as e:
        return Outcome(case.name, ops, "unsupported", e.message)
    except (NgrulesError, AssertionError) as e:
        return Outcome(case.name, ops, "fail", str(e).strip().splitlines()[0][:200])
    except Exception as e:  # an importer crash is a failure too, reported, not raised
        return Outcome(case.name, ops, "fail", f"{type(e).__name__}: {e}"[:200])
    return Outcome(case.name, ops, "pass")


#: Inputs that steer shapes rather than carry data (a Reshape's target, a Slice's bounds...):
#: given as graph inputs by some tests, they are fixed at import time.
STEERING = {
    "Reshape": (1,), "Expand": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Slice": (1, 2, 3, 4),
    "Split": (1,), "Gather": (1,), "Tile": (1,), "Pad": (1, 2, 3), "TopK": (1,),
    "ConstantOfShape": (0,), "Range": (0, 1, 2), "OneHot": (1,), "Dropout": (1, 2),
    "CumSum": (1,), "CumProd": (1,), "Resize": (1, 2, 3), "LSTM": (4,), "GRU": (4,), "RNN": (4,),
    "Compress": (1,), "CenterCropPad": (1,), "DFT": (1, 2), "HannWindow": (0,),
    "HammingWindow": (0,), "BlackmanWindow": (0,), "AffineGrid": (1,), "Col2Im": (1, 2),
    "MaxUnpool": (2,),
    **dict.fromkeys(("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                     "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                     "ReduceSumSquare"), (1,)),
}


def _steering(model) -> set[str]:
    return {n.input[i] for n in model.graph.node for i in STEERING.get(n.op_type, ())
            if i < len(n.input) and n.input[i]}


def _array(value) -> np.ndarray:
    from onnx import TensorProto, numpy_helper

    if isinstance(value, list | tuple):  # a sequence input: the importer refuses its type
        return [_array(v) for v in value]
    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


def _compare(name, got, expected, rtol, atol) -> None:
    if expected.dtype == np.float16:
        rtol = max(rtol, 2.0**-9)
    if got.shape != expected.shape:
        raise AssertionError(f"{name}: shape {got.shape}, expected {expected.shape}")
    if got.dtype != expected.dtype:
        raise AssertionError(f"{name}: dtype {got.dtype}, expected {expected.dtype}")
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=name)


def run_node_tests(select=None, transform=None, cases=None) -> Report:
    """Run every node test (those `select(case)` keeps, if given); with `transform`, the round
    trip through it, export and onnxruntime too."""
    report = Report()
    for case in cases if cases is not None else node_testcases():
        if case.kind != "node" or (select and not select(case)):
            continue
        report.outcomes.append(run_case(case, transform))
    return report
