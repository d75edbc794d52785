"""Issue 34 item 3: nodes written by `ngrules apply --pipeline P` on onnx's classic light nets
(random weights, `export_zoo_broad.classic`), and whether onnxruntime gives the same outputs.
Run from a worktree root: `PYTHONPATH=$PWD python bench/conv_affine_fold.py OUT_DIR`."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).parent))
from export_zoo_broad import classic  # noqa: E402

NETS = ["inception_v2", "densenet121", "shufflenet", "inception_v1", "resnet50", "squeezenet",
        "bvlc_alexnet", "vgg19", "zfnet512"]


def _run(path: Path, feeds: dict) -> list[np.ndarray]:
    """The outputs for the float inputs the file declares (the classics' unused shape inputs
    are fed zeros)."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    given = {i.name: feeds.get(i.name, np.zeros([d or 1 for d in i.shape], np.int64))
             for i in session.get_inputs()}
    return session.run(None, given)


def _feeds(model) -> dict:
    rng = np.random.default_rng(1)
    inits = {t.name for t in model.graph.initializer}
    return {i.name: rng.standard_normal([d.dim_value or 1 for d in i.type.tensor_type.shape.dim])
            .astype(np.float32) for i in model.graph.input
            if i.name not in inits and i.type.tensor_type.elem_type == 1}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in NETS:
        src = classic(name, out)
        model = onnx.load(src)
        feeds = _feeds(model)
        want = _run(src, feeds)
        row = [f"{name}: in {len(model.graph.node)}"]
        for pipeline in ("inference", "cpu"):
            dst = out / f"{name}_{pipeline}.onnx"
            subprocess.run([sys.executable, "-m", "ngrules.cli.main", "apply", str(src), "-o",
                            str(dst), "--pipeline", pipeline], check=True, capture_output=True)
            got = _run(dst, feeds)
            err = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want))
            row.append(f"{pipeline} {len(onnx.load(dst).graph.node)} (max |diff| {err:.1e})")
        print(", ".join(row), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
