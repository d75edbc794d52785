"""The tool's own speed on big models: a ResNet-50 and a VGG-19 through import, rewrite and
export, in process, with the peak memory each stage takes beside the model's size.

The models are built with `onnx.helper` (NCHW Conv, BatchNormalization, Relu, MaxPool,
GlobalAveragePool, Flatten, Gemm), random float32 weights, batch 1, 224x224, and cached as
files under the temp folder (`ngrules-bench-models/`). Each (model, pipeline) runs in a child
process of its own, so one run's memory is not another's: the child times `import_model(path)`,
`rewrite(..., pipeline)` (none: no rewrite), the export to a file as `ngrules apply -o out.onnx`
writes it (`graphio.save`, into /dev/shm where there is one: the disk is not timed), and then,
on its own, `to_onnx` (the ModelProto in memory); total is import + rewrite + export. Each
stage's time is wall and CPU seconds (the machine is shared); its peak resident memory (Linux's
`VmHWM`, reset between stages) is reported as (peak - resident before the import) / the model
file's size: everything the stages hold at their peak, the imported graph included.
With `--rounds N` each (model, pipeline) runs N times and the round of least wall time is kept.
Run: `python bench/big_models.py [--models resnet50,vgg19] [--pipelines none,cpu,inference]
[--rounds N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

STAGES = ("import", "rewrite", "export", "to_onnx")
VGG19 = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M",
         512, 512, 512, 512, "M", 512, 512, 512, 512, "M")
RESNET50 = ((64, 3), (128, 4), (256, 6), (512, 3))  # bottleneck width, blocks per stage


class _Net:
    """Nodes and float32 initializers of one model, with fresh names."""

    def __init__(self, seed: int = 0):
        from onnx import helper

        self.h = helper
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], [], 0

    def weight(self, shape, scale: float = 0.05, offset: float = 0.0) -> str:
        from onnx import numpy_helper

        name = f"w{len(self.inits)}"
        value = self.rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)
        self.inits.append(numpy_helper.from_array(value + np.float32(offset), name))
        return name

    def op(self, op: str, inputs, **attrs) -> str:
        self.count += 1
        out = f"{op.lower()}{self.count}"
        self.nodes.append(self.h.make_node(op, list(inputs), [out], name=out, **attrs))
        return out

    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, bias=False) -> str:
        w = self.weight([c_out, c_in, k, k], (2.0 / (c_in * k * k)) ** 0.5)
        b = [self.weight([c_out], 0.01)] if bias else []
        return self.op("Conv", [x, w, *b], kernel_shape=[k, k], strides=[stride, stride],
                       pads=[k // 2] * 4)

    def bn(self, x: str, c: int) -> str:
        params = [self.weight([c], 0.1, 1.0), self.weight([c], 0.1), self.weight([c], 0.1)]
        var = self.weight([c], 0.1, 1.0)
        self.inits[-1].raw_data = np.abs(np.frombuffer(self.inits[-1].raw_data,
                                                       np.float32)).tobytes()
        return self.op("BatchNormalization", [x, *params, var], epsilon=1e-5)

    def gemm(self, x: str, fan_in: int, fan_out: int) -> str:
        w = self.weight([fan_out, fan_in], fan_in ** -0.5)
        return self.op("Gemm", [x, w, self.weight([fan_out], 0.01)], transB=1)

    def model(self, name: str, x: str, size: int, classes: int):
        h = self.h
        self.nodes[-1].output[0] = "y"
        graph = h.make_graph(self.nodes, name, [h.make_tensor_value_info(x, 1, [1, 3, size, size])],
                             [h.make_tensor_value_info("y", 1, [1, classes])], self.inits)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        model.ir_version = 8
        return model


def resnet50(width: int = 64, size: int = 224, classes: int = 1000):
    """ResNet-50 (v1.5: stride on the 3x3), `width` the stem's channels (64 in the paper)."""
    net = _Net()
    h = net.op("Relu", [net.bn(net.conv("x", 3, width, 7, 2), width)])
    h = net.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c_in = width
    for stage, (mid, blocks) in enumerate(RESNET50):
        mid = mid * width // 64
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 0 else 1
            a = net.op("Relu", [net.bn(net.conv(h, c_in, mid, 1), mid)])
            a = net.op("Relu", [net.bn(net.conv(a, mid, mid, 3, stride), mid)])
            a = net.bn(net.conv(a, mid, 4 * mid, 1), 4 * mid)
            skip = h if block else net.bn(net.conv(h, c_in, 4 * mid, 1, stride), 4 * mid)
            h, c_in = net.op("Relu", [net.op("Add", [a, skip])]), 4 * mid
    h = net.op("Flatten", [net.op("GlobalAveragePool", [h])], axis=1)
    net.gemm(h, c_in, classes)
    return net.model("resnet50", "x", size, classes)


def vgg19(width: int = 64, size: int = 224, classes: int = 1000):
    """VGG-19 (configuration E, no batchnorm): 16 3x3 convs with biases, 3 fully connected."""
    net = _Net()
    h, c_in = "x", 3
    for c in VGG19:
        if c == "M":
            h = net.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
            continue
        c = c * width // 64
        h, c_in = net.op("Relu", [net.conv(h, c_in, c, 3, bias=True)]), c
    h = net.op("Flatten", [h], axis=1)
    hidden = 64 * width
    h = net.op("Relu", [net.gemm(h, c_in * (size // 32) ** 2, hidden)])
    h = net.op("Relu", [net.gemm(h, hidden, hidden)])
    net.gemm(h, hidden, classes)
    return net.model("vgg19", "x", size, classes)


MODELS = {"resnet50": resnet50, "vgg19": vgg19}


def model_file(name: str, folder: Path | None = None, **sizes) -> Path:
    """The model's file, built once and cached (a name per size)."""
    import onnx

    folder = folder or Path(tempfile.gettempdir()) / "ngrules-bench-models"
    folder.mkdir(exist_ok=True)
    tag = "-".join(f"{k}{v}" for k, v in sorted(sizes.items()))
    path = folder / f"{name}{'-' + tag if tag else ''}.onnx"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        onnx.save(MODELS[name](**sizes), str(tmp))
        tmp.replace(path)
    return path


def weight_count(path: Path) -> int:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer)


# -- one run, in the child ---------------------------------------------------------------------
def _status(key: str) -> int:
    """A field of /proc/self/status in bytes (0 where there is none)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM back to the current resident size
    except OSError:
        pass


def run_once(path: Path, pipeline: str, out: Path) -> dict:
    """Seconds and peak resident bytes (above the start) of each stage, in this process."""
    # onnx and the converters are loaded before the clock starts (a process's one-time cost)
    import gc

    import onnx  # noqa: F401

    import ngrules.interop.onnx.importing.converters  # noqa: F401
    from ngrules.cli.graphio import save
    from ngrules.engine.driver import rewrite
    from ngrules.interop.onnx.exporter import to_onnx
    from ngrules.interop.onnx.importer import import_model
    from ngrules.lang.library import load_library

    rules = load_library()
    gc.collect()
    base = _status("VmRSS")
    seconds, cpu, peaks = {}, {}, {}

    def stage(name, fn):
        _reset_peak()
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        seconds[name] = time.perf_counter() - start
        cpu[name] = time.process_time() - start_cpu
        peaks[name] = _status("VmHWM") - base
        return result

    imported = stage("import", lambda: import_model(path))
    outputs, names = imported.outputs, imported.output_names
    if pipeline != "none":
        outputs = stage("rewrite", lambda: rewrite(outputs, rules, pipeline=pipeline).outputs)
    else:
        seconds["rewrite"], cpu["rewrite"], peaks["rewrite"] = 0.0, 0.0, peaks["import"]
    stage("export", lambda: save(str(out), outputs, names))
    model = stage("to_onnx", lambda: to_onnx(outputs, output_names=names))
    return {"seconds": seconds, "cpu": cpu, "peak": peaks, "nodes": len(model.graph.node)}


#: Where the output is written when there is such a folder (a file system in memory): the
#: export's time is then the tool's, not the disk's (`graphio.save` syncs the file to disk).
_MEMORY_FS = "/dev/shm"


def measure(path: Path, pipeline: str) -> dict:
    """`run_once` in a child process (its memory its own), with the output checked to run."""
    with tempfile.TemporaryDirectory(dir=_MEMORY_FS if os.path.isdir(_MEMORY_FS) else None) as tmp:
        out = Path(tmp) / "out.onnx"
        code = (f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                f"import big_models as b; from pathlib import Path; "
                f"print(json.dumps(b.run_once(Path({str(path)!r}), {pipeline!r}, "
                f"Path({str(out)!r}))))")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        if done.returncode:
            raise RuntimeError(f"{path.name} {pipeline}: {done.stderr.strip()[-2000:]}")
        row = json.loads(done.stdout.strip().splitlines()[-1])
        row["out_bytes"] = out.stat().st_size
    return row


def _total(row: dict) -> float:
    """Wall seconds of import + rewrite + export: a round waits less the lower it is (the
    machine is shared), so the fastest of several rounds is the tool's own time."""
    return sum(row["seconds"][k] for k in ("import", "rewrite", "export"))


def table(rows: list[dict]) -> str:
    """Per stage: wall seconds (CPU seconds of the process) and peak memory / model size."""
    head = ("| model | pipeline | import s | rewrite s | export s | total s | to_onnx s "
            "| peak / model size: import, rewrite, export, to_onnx | nodes out |")
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        s, c, p, size = r["seconds"], r["cpu"], r["peak"], r["model_bytes"]
        cells = [f"{s[k]:.2f} ({c[k]:.2f})" for k in ("import", "rewrite", "export")]
        total = _total(r)
        total_cpu = sum(c[k] for k in ("import", "rewrite", "export"))
        cells += [f"**{total:.2f}** ({total_cpu:.2f})", f"{s['to_onnx']:.2f} ({c['to_onnx']:.2f})"]
        peaks = ", ".join(f"{p[k] / size:.2f}" for k in STAGES)
        lines.append(f"| {r['model']} | {r['pipeline']} | " + " | ".join(cells)
                     + f" | {peaks} | {r['nodes']} |")
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,vgg19")
    parser.add_argument("--pipelines", default="none,cpu,inference")
    parser.add_argument("--width", type=int, default=64, help="stem channels (64: full size)")
    parser.add_argument("--size", type=int, default=224, help="image side")
    parser.add_argument("--folder", type=Path, default=None, help="where models are cached")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs of each (model, pipeline); the fastest is kept")
    args = parser.parse_args(argv)
    sizes = {} if (args.width, args.size) == (64, 224) else {"width": args.width,
                                                             "size": args.size}
    rows = []
    for name in args.models.split(","):
        path = model_file(name, args.folder, **sizes)
        print(f"{name}: {weight_count(path):,} weights, {path.stat().st_size / 2**20:.0f} MiB",
              flush=True)
        for pipeline in args.pipelines.split(","):
            runs = [measure(path, pipeline) for _ in range(max(args.rounds, 1))]
            row = {"model": name, "pipeline": pipeline, "model_bytes": path.stat().st_size,
                   "rounds": len(runs), **min(runs, key=_total)}
            rows.append(row)
            print(table([row]).splitlines()[-1], flush=True)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
