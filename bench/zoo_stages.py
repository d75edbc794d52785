"""The zoo (tests/zoo/*.onnx) through the project, one stage at a time.

Shared by `bench/zoo_status.py` (which stage fails and why), `bench/output_quality.py` (what
the pipelines write) and `tests/test_zoo.py` (the models that pass keep passing). A model's
symbolic dimensions get length 2; its inputs are random: floats standard normal, `input_ids`
below the zoo's vocabulary (64), an `attention_mask` of ones with the last three tokens of the
second sequence masked, any other integer input in [0, 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import ngrules as ng
from ngrules.interop.onnx.importer import Imported, import_model
from ngrules.lang.library import load_library

ZOO = Path(__file__).resolve().parent.parent / "tests" / "zoo"
VOCAB = 64
SYMBOLIC_LENGTH = 2
RTOL, ATOL = 1e-3, 1e-4


def zoo_files() -> list[Path]:
    return sorted(ZOO.glob("*.onnx"))


def shipped_pipelines() -> list[str]:
    return sorted(load_library().pipelines)


def symbolic_lengths(model) -> dict[str, int]:
    """Every `dim_param` of the graph's inputs and outputs, at SYMBOLIC_LENGTH."""
    names = {
        d.dim_param
        for vi in list(model.graph.input) + list(model.graph.output)
        for d in vi.type.tensor_type.shape.dim
        if d.dim_param
    }
    return dict.fromkeys(sorted(names), SYMBOLIC_LENGTH)


def random_feeds(model, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs for the model's graph inputs (initializers left out)."""
    from onnx.helper import tensor_dtype_to_np_dtype

    rng = np.random.default_rng(seed)
    lengths = symbolic_lengths(model)
    initializers = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        t = vi.type.tensor_type
        shape = [d.dim_value or lengths[d.dim_param] for d in t.shape.dim]
        dtype = tensor_dtype_to_np_dtype(t.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
        elif vi.name == "attention_mask":
            mask = np.ones(shape, dtype)
            mask[-1, -3:] = 0
            feeds[vi.name] = mask
        else:
            high = VOCAB if vi.name == "input_ids" else 2
            feeds[vi.name] = rng.integers(0, high, shape).astype(dtype)
    return feeds


def run_onnxruntime(model, feeds: dict[str, np.ndarray], threads: int = 1) -> list[np.ndarray]:
    """The model's outputs under onnxruntime, fed only the inputs it declares."""
    session = ort_session(model, threads)
    wanted = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in wanted})


def ort_session(model, threads: int = 1, level: str = "ENABLE_ALL"):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = threads
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, f"ORT_{level}")
    options.log_severity_level = 3
    providers = ["CPUExecutionProvider"]
    return ort.InferenceSession(model.SerializeToString(), options, providers=providers)


@dataclass
class Outcome:
    """How far one model got with one pipeline: the stage that failed and why, or ok."""

    stage: str = "ok"
    reason: str = ""
    nodes: int = 0
    fired: dict[str, int] = field(default_factory=dict)
    exported: object = None

    @property
    def ok(self) -> bool:
        return self.stage == "ok"

    def cell(self) -> str:
        return "ok" if self.ok else f"{self.stage}: {self.reason}"


def short_reason(exc: BaseException, width: int = 90) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= width else text[: width - 3] + "..."


def import_zoo_model(model) -> Imported:
    return import_model(model, lengths=symbolic_lengths(model))


def through_pipeline(model, imported: Imported, pipeline: str | None, rules=None,
                     target: str = "onnx", opset: int | None = 17) -> Outcome:
    """Rewrite (unless `pipeline` is None), export (for `target`, at `opset`; None: the
    model's own, as `ngrules apply` writes it), and compare with the original under
    onnxruntime on random inputs; the first stage that fails is the outcome."""
    if opset is None:
        from ngrules.cli.graphio import written_opset

        opset = written_opset(None, imported.opset) or 17
    outputs, fired = imported.outputs, {}
    if pipeline is not None:
        try:
            res = ng.rewrite(outputs, rules or load_library(), pipeline=pipeline)
        except Exception as exc:
            return Outcome("rewrite", short_reason(exc))
        if res.stop != "fixpoint":
            return Outcome("rewrite", f"stopped: {res.stop} {res.message}".strip())
        outputs, fired = res.outputs, dict(res.fired())
    try:
        exported = ng.to_onnx(outputs, output_names=imported.output_names, target=target,
                              opset=opset)
    except Exception as exc:
        return Outcome("export", short_reason(exc), fired=fired)
    outcome = Outcome("ok", "", len(exported.graph.node), fired, exported)
    feeds = random_feeds(model)
    try:
        want = run_onnxruntime(model, feeds)
        got = run_onnxruntime(exported, feeds)
    except Exception as exc:
        outcome.stage, outcome.reason = "onnxruntime", short_reason(exc)
        return outcome
    for name, w, g in zip(imported.output_names, want, got):
        if w.shape != g.shape:
            outcome.stage, outcome.reason = "compare", f"{name}: shape {g.shape} != {w.shape}"
            return outcome
        if not np.allclose(g, w, rtol=RTOL, atol=ATOL):
            err = float(np.max(np.abs(g.astype(np.float64) - w)))
            outcome.stage, outcome.reason = "compare", f"{name}: max abs error {err:.3g}"
            return outcome
    return outcome
