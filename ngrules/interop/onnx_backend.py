"""ONNX's own backend node tests run through import and the numpy executor.

`onnx.backend.test.case.node.collect_testcases()` builds every node test of the installed onnx
(a model, input arrays, expected outputs). A test is run when every op of its model has a
converter; it passes when each output matches within the test's tolerances (float32 defaults
rtol=1e-3, atol=1e-7, as ONNX's runner uses), fails on a mismatch or an error, and counts as
unsupported when the importer refuses a feature of it (an integer tensor, an attribute value).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from ngrules.errors import NgrulesError
from ngrules.interop import UnsupportedOp
from ngrules.interop.onnx_import import import_model, supported_ops
from ngrules.ir.executor import execute
from ngrules.ir.graph import toposort


@dataclass
class Outcome:
    name: str
    ops: tuple[str, ...]
    status: str  # "pass", "fail", "unsupported"
    detail: str = ""


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def by_op(self) -> dict[str, Counter]:
        table: dict[str, Counter] = defaultdict(Counter)
        for o in self.outcomes:
            for op in set(o.ops):
                table[op][o.status] += 1
        return dict(table)

    def with_status(self, status: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == status]

    def table(self) -> str:
        lines = [f"{'op':24s} {'pass':>5s} {'fail':>5s} {'unsup':>5s}"]
        for op, c in sorted(self.by_op().items()):
            lines.append(f"{op:24s} {c['pass']:5d} {c['fail']:5d} {c['unsupported']:5d}")
        total = Counter(o.status for o in self.outcomes)
        lines.append(f"{'tests':24s} {total['pass']:5d} {total['fail']:5d} "
                     f"{total['unsupported']:5d}")
        return "\n".join(lines)


def node_testcases():
    """ONNX's node test cases (built in memory by the installed onnx package)."""
    from onnx.backend.test.case.node import collect_testcases

    return collect_testcases()


def model_ops(model) -> tuple[str, ...]:
    ops = [n.op_type for n in model.graph.node]
    for f in model.functions:
        ops += [n.op_type for n in f.node]
    return tuple(ops)


def runnable(case) -> bool:
    """Every op of the test's model has a converter (and it defines no local functions)."""
    known = set(supported_ops())
    return not case.model.functions and all(op in known for op in model_ops(case.model))


def run_case(case) -> Outcome:
    ops = tuple(n.op_type for n in case.model.graph.node)
    names = [i.name for i in case.model.graph.input
             if i.name not in {t.name for t in case.model.graph.initializer}]
    try:
        for inputs, expected in case.data_sets:
            values = dict(zip(names, (np.asarray(v) for v in inputs)))
            fixed = {k: v for k, v in values.items() if not _is_float(v)}
            imported = import_model(case.model, constants=fixed)
            live = {n.name for n in toposort(imported.outputs) if n.op == "Placeholder"}
            feeds = {k: v for k, v in values.items() if k in live}
            got = execute(imported.outputs, feeds)
            for name, g, e in zip(imported.output_names, got, expected):
                _compare(name, g, np.asarray(e), case.rtol, case.atol)
    except UnsupportedOp as e:
        return Outcome(case.name, ops, "unsupported", e.message)
    except (NgrulesError, AssertionError) as e:
        return Outcome(case.name, ops, "fail", str(e).splitlines()[0][:200])
    return Outcome(case.name, ops, "pass")


def _is_float(value: np.ndarray) -> bool:
    return value.dtype in (np.float32, np.float64)


def _compare(name, got, expected, rtol, atol) -> None:
    if got.shape != expected.shape:
        raise AssertionError(f"{name}: shape {got.shape}, expected {expected.shape}")
    if got.dtype != expected.dtype:
        raise AssertionError(f"{name}: dtype {got.dtype}, expected {expected.dtype}")
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=name)


def run_node_tests(select=None) -> Report:
    """Run every runnable node test (those `select(case)` keeps, if given)."""
    report = Report()
    for case in node_testcases():
        if case.kind != "node" or not runnable(case) or (select and not select(case)):
            continue
        report.outcomes.append(run_case(case))
    return report
