"""What one node costs onnxruntime's CPU besides its work, in the cost model's units (FLOPs
plus bytes moved): the measurement behind `ngrules.saturation.costs.PER_NODE`.

A chain of `--length` nodes of one elementwise op (Relu, Tanh) runs on tensors of a few
elements (the time per node is the launch: the kernel call, the allocation, the scheduling)
and of 256x1024 elements (the time per node less the launch, per element, over the model's
units per element: 1 FLOP + 8 bytes for Relu, 8 FLOPs + 8 bytes for Tanh, gives the time of
one unit). The launch over one unit's time is PER_NODE. One thread, graph optimisations off
(onnxruntime would otherwise fold nothing here, but it is left out of the question), CPU time,
the best of `--rounds` rounds of `--runs` runs. Run: `python bench/ort_node_cost.py`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

#: The cost model's units per output element (FLOPs + bytes read and written, float32).
UNITS = {"Relu": 1 + 8, "Tanh": 8 + 8}


def chain_seconds(op: str, shape: list[int], length: int, rounds: int, runs: int) -> float:
    """CPU seconds per node of a chain of `length` `op` nodes on a tensor of `shape`."""
    import onnxruntime as ort
    from onnx import helper

    nodes, prev = [], "x"
    for i in range(length):
        out = "y" if i == length - 1 else f"t{i}"
        nodes.append(helper.make_node(op, [prev], [out]))
        prev = out
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", 1, shape)],
                              [helper.make_tensor_value_info("y", 1, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    feeds = {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(runs):
            session.run(None, feeds)
        best = min(best, (time.process_time() - start) / runs)
    return best / length


def main(argv=None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    small, large = [1, 16], [256, 1024]
    out = {}
    print("| op | launch us/node | ns per element | ns per unit | launch / unit |")
    print("|---|---:|---:|---:|---:|")
    for op, units in UNITS.items():
        launch = chain_seconds(op, small, args.length, args.rounds, args.runs)
        each = chain_seconds(op, large, args.length, args.rounds, args.runs)
        per_element = max(each - launch, 1e-15) / float(np.prod(large))
        per_unit = per_element / units
        out[op] = launch / per_unit
        print(f"| {op} | {launch * 1e6:.2f} | {per_element * 1e9:.3f} | {per_unit * 1e9:.4f} | "
              f"{out[op]:,.0f} |")
    return out


if __name__ == "__main__":
    main()
