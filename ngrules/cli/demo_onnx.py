"""`ngrules demo --onnx`: the main job on ONNX models nobody here wrote as ngrules graphs.

Each of three models built with onnx.helper (an MLP with batchnorm and relu, a small CNN, a
transformer encoder block) is imported with named axes, rewritten by the `cpu` pipeline,
exported, and run by onnxruntime before and after. Needs `pip install 'ngrules[onnx]'`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from ngrules.engine.driver import rewrite
from ngrules.ir.graph import toposort
from ngrules.lang.library import load_library


def _input(model, lengths) -> np.ndarray:
    dims = model.graph.input[0].type.tensor_type.shape.dim
    shape = [lengths.get(d.dim_param, d.dim_value) for d in dims]
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def _session(model):
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def demo_model(name: str, out: Path, rules) -> float:
    """Import, rewrite, export and compare one example model; the largest difference."""
    import onnx

    from ngrules.cli import graphio
    from ngrules.interop.onnx.examples import MODELS

    build, lengths = MODELS[name]
    model = build()
    out.mkdir(parents=True, exist_ok=True)
    original, rewritten = out / f"{name}.onnx", out / f"{name}.rewritten.onnx"
    original.write_bytes(model.SerializeToString())  # the example, as a user's file
    outputs, names = graphio.load(str(original), graphio.ReadOptions(lengths))
    result = rewrite(outputs, rules, pipeline="cpu")
    graphio.save(str(rewritten), result.outputs, names)
    exported = onnx.load(str(rewritten))
    x = _input(model, lengths)
    want = _session(model).run(None, {"x": x})[0]
    got = _session(exported).run(None, {"x": x})[0]
    diff = float(np.max(np.abs(want - got)) / (1.0 + np.max(np.abs(want))))
    before = Counter(n.op for n in toposort(outputs))
    after = Counter(n.op for n in toposort(result.outputs))
    axes = ", ".join(f"{a.name}:{a.length}" for a in outputs[0].axes)
    print(f"{name}: {len(model.graph.node)} ONNX nodes -> {sum(before.values())} ngrules nodes "
          f"-> {sum(after.values())} after the cpu pipeline ({result.stop}); output axes [{axes}]")
    fired = ", ".join(f"{rule} x{count}" for rule, count in result.fired().items())
    print(f"  rules fired: {fired or 'none'}")
    print(f"  onnxruntime, original vs rewritten: largest relative difference {diff:.1e}")
    return diff


def run(args) -> int:
    from ngrules.interop.onnx import require_onnx

    require_onnx()
    rules = load_library()
    out = Path(args.out)
    diffs = [demo_model(name, out, rules) for name in ("mlp", "cnn", "transformer")]
    print(f"\nmodels written to {out}/ (the originals and the rewritten exports)")
    return 0 if max(diffs) < 1e-4 else 1
