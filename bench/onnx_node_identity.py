"""Is the round trip with no rule the identity? ONNX's backend node tests, each imported (integer
inputs that steer shapes given as constants, as `ngrules.interop.onnx.backend` does) and
exported with no rule at the input's opset (`graphio.written_opset`, as `ngrules apply` does).

Run: `python bench/onnx_node_identity.py [--only SUBSTRING] [--show grow|error|differ]`.
Prints, over every node test of the installed onnx: how many import, how many of those export
with the same multiset of op types and no more nodes, how many with fewer nodes and no op type
added (shape computations folded), how many with another multiset, and how many fail to export
(and of those, how many onnxruntime refuses as read); how many of those exported onnxruntime
(or onnx's checker) refuses as they were read and as written (the exporter writes them with a
warning, `refused.RefusedAsRead`: no less runnable than the input); then the ops of the tests
that differ, most frequent first.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def classify(case) -> tuple[str, str, bool]:
    """('refused' | 'import-error' | 'same' | 'fewer' | 'differ' | 'export-error' |
    'export-error-input-refused', detail, whether written with onnxruntime refusing it as read)."""
    import warnings

    from ngrules.cli.graphio import written_opset
    from ngrules.errors import NgrulesError
    from ngrules.interop.onnx import UnsupportedOp
    from ngrules.interop.onnx.backend import _feeds, _steering
    from ngrules.interop.onnx.exporter import to_onnx
    from ngrules.interop.onnx.exporting.passes.refused import RefusedAsRead
    from ngrules.interop.onnx.importer import import_model

    inputs, _ = case.data_sets[0]
    values = _feeds(case, inputs)
    fixed = {k: v for k, v in values.items() if k in _steering(case.model)}
    try:
        imported = import_model(case.model, constants=fixed)
    except UnsupportedOp as e:
        return "refused", e.message[:120], False
    except Exception as e:  # noqa: BLE001  an importer failure is counted, not raised
        return "import-error", f"{type(e).__name__}: {e}"[:120], False
    options = {}
    opset = written_opset(None, imported.opset)
    if opset is not None:
        options["opset"] = opset
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RefusedAsRead)
            model = to_onnx(imported.outputs, output_names=imported.output_names, **options)
    except (NgrulesError, Exception) as e:  # noqa: BLE001
        kind = "export-error-input-refused" if _ort_refuses(case.model) else "export-error"
        return kind, f"{type(e).__name__}: {e}"[:160], False
    as_read = any(issubclass(w.category, RefusedAsRead) for w in caught)
    before = Counter(n.op_type for n in case.model.graph.node)
    after = Counter(n.op_type for n in model.graph.node)
    if _same_ops(before, after):
        return "same", "", as_read
    if all(after[op] <= before[op] for op in after):
        return "fewer", f"{dict(before)} -> {dict(after)}", as_read
    return "differ", f"{dict(before)} -> {dict(after)}", as_read


def _ort_refuses(model) -> bool:
    """Whether onnxruntime refuses the test's own model (no kernel for its op and types)."""
    try:
        import onnxruntime as ort

        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except ImportError:
        return False
    except Exception:  # noqa: BLE001  its refusal, of several types
        return True
    return False


def _same_ops(before: Counter, after: Counter) -> bool:
    """The same multiset of op types, up to input Constant nodes written as initializers."""
    return all(after[op] == n for op, n in before.items() if op != "Constant") and \
        after["Constant"] <= before["Constant"] and set(after) <= set(before)


def main() -> None:
    from ngrules.interop.onnx.backend import node_testcases

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="only the tests whose name contains this")
    parser.add_argument("--show", choices=["differ", "fewer", "export-error",
                                           "export-error-input-refused", "import-error"],
                        help="list the tests of this outcome")
    args = parser.parse_args()
    cases = [c for c in node_testcases() if c.kind == "node"]
    if args.only:
        cases = [c for c in cases if args.only in c.name]
    counts: Counter = Counter()
    grown: Counter = Counter()
    shown = []
    as_read = 0
    for case in cases:
        outcome, detail, refused_as_read = classify(case)
        counts[outcome] += 1
        as_read += refused_as_read
        if outcome in ("differ", "fewer", "export-error", "export-error-input-refused"):
            grown.update({n.op_type for n in case.model.graph.node})
        if outcome == args.show:
            shown.append(f"{case.name}: {detail}")
    refused_too = counts["export-error-input-refused"]
    imported = counts["same"] + counts["fewer"] + counts["differ"] + counts["export-error"] + \
        refused_too
    print(f"node tests: {len(cases)}")
    print(f"not imported: {counts['refused']} refused (UnsupportedOp), "
          f"{counts['import-error']} import errors")
    print(f"imported: {imported}")
    share = 100 * counts["same"] / imported if imported else 0.0
    print(f"  same op multiset, no more nodes: {counts['same']} ({share:.1f}% of imported, "
          f"{100 * counts['same'] / max(len(cases), 1):.1f}% of all)")
    print(f"  fewer nodes, no op type added: {counts['fewer']}")
    print(f"  another op multiset or more nodes: {counts['differ']}")
    print(f"  export errors: {counts['export-error'] + refused_too} ({refused_too} where "
          "onnxruntime refuses the test's own model too)")
    print(f"  written though onnxruntime (or onnx's checker) refuses them, as it refuses the "
          f"test's own model: {as_read}")
    print("ops of the tests that differ or fail to export:",
          ", ".join(f"{op} {n}" for op, n in grown.most_common(40)))
    for line in shown:
        print(line)


if __name__ == "__main__":
    main()
