"""Issue 37's ONNX reproductions at full size: each small model (or graph file) is written to a
temporary folder and read by `ngrules` in a child process under an address-space cap, a wall
timeout and (for F6) a Ctrl-C sent after a few seconds. Each line is the case, the child's exit
code (-9: killed at the timeout), its wall and CPU seconds and its peak resident memory
(`wait4`).

F2  ten ConstantOfShape nodes of 256 MiB each, and their casts (each under the per-node limit)
F3  a MaxPool with a 1000x1000 window and its indices, folded by onnx's reference evaluator
F4  20 tensors naming one sparse external file of 100 MB, each the whole of it
F5a a model that is a symbolic link to /proc/self/pagemap
F5b a sparse model of 1.9 GB (one all-zero float32 initializer)
F6  an Einsum whose equation holds a byte that is not UTF-8 (Ctrl-C sent after 10 s)
F13 `export` of a graph: the Sum of a scalar broadcast to 10^12 elements

Run: `python bench/onnx_budgets.py [--cases F2,F3] [--cap-gb 4] [--timeout 60]`, with PYTHONPATH
naming the tree to measure (F3 gets 90 s more than the timeout: the default import budget is
120 s).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _model(nodes, inputs, outputs, inits=(), opset=17):
    from onnx import helper

    graph = helper.make_graph(nodes, "t", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _v(name, shape, elem=1):
    from onnx import helper

    return helper.make_tensor_value_info(name, elem, shape)


def _ints(name, values):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def f2(folder: Path) -> list[str]:
    from onnx import helper

    nodes, outs = [helper.make_node("Constant", [], ["s"], value=_ints("s", [1 << 25]))], []
    for i in range(10):
        nodes.append(helper.make_node("ConstantOfShape", ["s"], [f"c{i}"],
                                      value=_ints("one", [1])))
        nodes.append(helper.make_node("Cast", [f"c{i}"], [f"y{i}"], to=1))
        outs.append(_v(f"y{i}", [1 << 25]))
    path = folder / "f2.onnx"
    path.write_bytes(_model(nodes, [], outs).SerializeToString())
    return ["show", str(path)]


def f3(folder: Path) -> list[str]:
    """MaxPool's second output (the indices, int64) makes it a shape computation to fold."""
    from onnx import helper

    nodes = [helper.make_node("ConstantOfShape", ["s"], ["x"]),
             helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[1000, 1000])]
    m = _model(nodes, [], [_v("p", [1, 1, 1001, 1001])], [_ints("s", [1, 1, 2000, 2000])])
    path = folder / "f3.onnx"
    path.write_bytes(m.SerializeToString())
    return ["show", str(path)]


def f4(folder: Path) -> list[str]:
    from onnx import TensorProto, helper

    size = 100_000_000
    with open(folder / "w.bin", "wb") as f:
        f.truncate(size)
    inits, nodes, outs = [], [], []
    for i in range(20):
        t = TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[size // 4])
        t.data_location = TensorProto.EXTERNAL
        t.external_data.add(key="location", value="w.bin")
        t.external_data.add(key="length", value=str(size))
        inits.append(t)
        nodes.append(helper.make_node("Neg", [f"w{i}"], [f"y{i}"]))
        outs.append(_v(f"y{i}", [size // 4]))
    path = folder / "f4.onnx"
    path.write_bytes(_model(nodes, [], outs, inits).SerializeToString())
    return ["show", str(path)]


def f5a(folder: Path) -> list[str]:
    path = folder / "f5a.onnx"
    path.symlink_to("/proc/self/pagemap")
    return ["show", str(path)]


def f5b(folder: Path) -> list[str]:
    """The model's message, then one more graph field holding the initializer, whose raw data
    is left a hole of the file (as `weights.write` lays a model out)."""
    from onnx import TensorProto, helper

    from ngrules.interop.onnx.weights import _GRAPH_INIT, _MODEL_GRAPH, _RAW, _encode_varint

    n = 475_000_000  # float32: 1.9 GB
    m = _model([helper.make_node("Neg", ["w"], ["y"])], [], [_v("y", [n])])
    header = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[n]).SerializeToString()
    tensor = header + _encode_varint(_RAW << 3 | 2) + _encode_varint(4 * n)
    init = _encode_varint(_GRAPH_INIT << 3 | 2) + _encode_varint(len(tensor) + 4 * n)
    graph = _encode_varint(_MODEL_GRAPH << 3 | 2) + _encode_varint(len(init) + len(tensor) + 4 * n)
    path = folder / "f5b.onnx"
    with open(path, "wb") as f:
        f.write(m.SerializeToString() + graph + init + tensor)
        f.truncate(f.tell() + 4 * n)
    return ["show", str(path)]


def f6(folder: Path) -> list[str]:
    from onnx import helper

    node = helper.make_node("Einsum", ["x", "w"], ["y"], name="e", equation=b"i\xffj,jk->ik")
    m = _model([node], [_v("x", [2, 3]), _v("w", [3, 4])], [_v("y", [2, 4])])
    path = folder / "f6.onnx"
    path.write_bytes(m.SerializeToString())
    return ["show", str(path)]


def f13(folder: Path) -> list[str]:
    import ngrules as ng
    from ngrules.ir.graphfile import save_graph

    a, b = ng.make_axis(10**6, name="A"), ng.make_axis(10**6, name="B")
    s = ng.sum(ng.broadcast(ng.constant(np.float32(2.0), []), [a, b]), out_axes=())
    save_graph(str(folder / "f13.json"), [s])
    return ["export", str(folder / "f13.json"), "-o", str(folder / "f13.onnx")]


CASES = {"F2": f2, "F3": f3, "F4": f4, "F5a": f5a, "F5b": f5b, "F6": f6, "F13": f13}


def run(argv: list[str], cap: int, timeout: float, interrupt_after: float | None):
    """(exit code, wall seconds, CPU seconds, peak resident MB, last line of stderr) of one
    child (wall time includes waiting for a core on a shared machine; CPU time does not)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", "from ngrules.cli.main import main; "
                              "import sys; sys.exit(main())", *argv],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             preexec_fn=limit)
    deadline, sent = start + timeout, False
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        now = time.perf_counter()
        if interrupt_after is not None and not sent and now - start > interrupt_after:
            child.send_signal(signal.SIGINT)
            sent = True
        if now > deadline:
            child.kill()
        time.sleep(0.05)
    wall = time.perf_counter() - start
    err = child.stderr.read().decode(errors="replace").strip().splitlines()
    code = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return code, wall, cpu, usage.ru_maxrss / 1024, (err[-1] if err else "")[:150]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--cap-gb", type=float, default=4.0)
    p.add_argument("--timeout", type=float, default=60.0)
    args = p.parse_args()
    for name in args.cases.split(","):
        with tempfile.TemporaryDirectory() as folder:
            argv = CASES[name](Path(folder))
            timeout = args.timeout + (90 if name == "F3" else 0)  # past the 120 s budget
            code, wall, cpu, peak, last = run(argv, int(args.cap_gb * 2**30), timeout,
                                              10.0 if name == "F6" else None)
            print(f"{name:4} exit {code:3}  {wall:7.2f} s wall  {cpu:7.2f} s CPU  {peak:6.0f} MB"
                  f"  {last}", flush=True)


if __name__ == "__main__":
    main()
