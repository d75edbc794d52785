"""The ONNX op a declaration names (`op ... = body onnx Op(...)`) checked against its body.

Each random instance of the declared op is written to ONNX as that op alone (the exporter's
own path) and run by onnxruntime; the body runs on the executor. They must agree within a
float32 tolerance (onnxruntime's kernels are float32 ones). Without onnxruntime installed
there is nothing to run, and no verdict; an op the exporter's opset lacks is exported as a
function of its body, and is reported as such.
"""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.composites import declared as onnx_declared
from ngrules.interop.onnx.exporter import OPSET, to_onnx
from ngrules.ir import declared
from ngrules.ir.graph import Node, make_node
from ngrules.verification.kernels import KernelVerdict, verify_kernel


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime


def _under_onnxruntime(ort, opset: int):
    """node -> a function of arrays running the node's ONNX form (at `opset`) in onnxruntime."""

    def fast_of(node: Node):
        inputs = [make_node("Placeholder", name=f"in{i}", axes=a.axes, dtype=a.dtype)
                  for i, a in enumerate(node.args)]
        built = node.with_args(tuple(inputs))
        outputs = [built] if built.outputs is None else [built[i] for i in range(len(
            built.outputs))]
        model = to_onnx(outputs, opset=opset)
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])

        def run(*arrays):
            values = session.run(None, {f"in{i}": a for i, a in enumerate(arrays)})
            return values[0] if len(values) == 1 else tuple(values)

        return run

    return fast_of


def verify_onnx_op(name: str, examples: int = 20, opset: int | None = None
                   ) -> KernelVerdict | None:
    """The ONNX op declared for `name` against its body, written at `opset` (default: the
    exporter's), or None without onnxruntime. An op newer than that opset is exported as a
    function of its body, so there is nothing to compare: unverified, naming the opset."""
    ort = _onnxruntime()
    target = declared.DECLARATIONS[name].onnx
    if ort is None or target is None:
        return None
    opset = OPSET if opset is None else opset
    if not target.domain and not onnx_declared.standard_op_available(target.op, opset):
        return KernelVerdict(name, True, what="onnx", unverified=(
            f"{target.op} is not a standard ONNX op at opset {opset}: it is exported as a "
            "function of its body (verify --opset N checks it at the opset that has it)"))
    return verify_kernel(name, examples, rtol=1e-4, atol=1e-5,
                         fast_of=_under_onnxruntime(ort, opset), what="onnx", dtype=np.float32)


def verify_onnx_ops(ops, opset: int | None = None) -> list[KernelVerdict]:
    """A verdict for each of these declared ops that names its ONNX op (at `opset`)."""
    verdicts = [verify_onnx_op(name, opset=opset) for name in ops if name in declared.DECLARATIONS]
    return [v for v in verdicts if v is not None]
