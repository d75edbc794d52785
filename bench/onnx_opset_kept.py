"""Is a model's opset kept? The onnx package's light networks (opset 9, random weights as in
`tool_speed`), imported and exported with no rule at the opset `ngrules apply` writes
(`graphio.written_opset`): the opset in and out, the nodes in and out (the fills the random
weights replaced left out), the op types that differ, the largest difference under
onnxruntime on one random input.

Run: `python bench/onnx_opset_kept.py`.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

NETS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
        "shufflenet", "squeezenet", "vgg19", "zfnet512")


def _opset(model) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def one(name: str) -> str:
    import onnx
    from tool_speed import model_file

    from ngrules.cli.graphio import written_opset
    from ngrules.interop.onnx.exporter import to_onnx
    from ngrules.interop.onnx.importer import import_model

    model = onnx.load(model_file(name))
    try:
        imported = import_model(model)
        out = to_onnx(imported.outputs, output_names=imported.output_names,
                      opset=written_opset(None, imported.opset))
    except Exception as e:  # noqa: BLE001  counted and shown
        return f"{name}: opset {_opset(model)} -> error {type(e).__name__}: {e}"[:300]
    before = Counter(n.op_type for n in model.graph.node)
    after = Counter(n.op_type for n in out.graph.node)
    rng = np.random.default_rng(0)
    data = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in out.graph.input}
    want = _run(model, data)
    got = _run(out, data)
    err = max(float(np.max(np.abs(a - b), initial=0, where=~(np.isnan(a) & np.isnan(b))))
              for a, b in zip(want, got))
    differ = f" added {dict(after - before)} removed {dict(before - after)}" \
        if before != after else " same op multiset"
    return (f"{name}: opset {_opset(model)} -> {_opset(out)}, nodes {before.total()} -> "
            f"{after.total()},{differ}, max |difference| {err:.2g}")


def _run(model, data: dict) -> list:
    """The model's outputs on `data` (a leftover input of another type: zeros)."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString())
    feeds = {i.name: data.get(i.name, np.zeros(
        [d if isinstance(d, int) else 1 for d in i.shape],
        np.float32 if i.type == "tensor(float)" else np.int64)) for i in session.get_inputs()}
    return session.run(None, feeds)


def main() -> None:
    for name in NETS:
        print(one(name), flush=True)


if __name__ == "__main__":
    main()
