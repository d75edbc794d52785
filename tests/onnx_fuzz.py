"""ONNX models mutated as an attacker or a broken exporter would: bit flips and cuts of the file,
attribute values, dims, element types, op types, names, dropped, duplicated and reordered nodes,
tensor data cut short. The models: three built here, networks the onnx wheel ships and the
project's zoo (`tests/zoo`). Every mutant must import or raise an `NgrulesError` of one line,
quickly and with bounded memory (issue 25). `tests/test_onnx_fuzz.py` runs a fixed-seed share in the
suite; run this file for the full campaign and its figures:

    python tests/onnx_fuzz.py --count 10000 --seed N [--extra 'more/*.onnx']
"""

from __future__ import annotations

import argparse
import faulthandler
import glob
import os
import random
import resource
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from ngrules.errors import NgrulesError
from ngrules.interop.onnx.examples import MODELS
from ngrules.interop.onnx.importer import import_model, symbolic_dims

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
#: Networks exported from PyTorch that the onnx wheel ships as test data (small, with weights).
TORCH_MODELS = ("test_Conv2d", "test_Linear", "test_BatchNorm2d_eval", "test_MaxPool2d",
                "test_PixelShuffle", "test_Softmax", "test_GLU", "test_Conv2d_groups",
                "test_Embedding", "test_ConstantPad2d", "test_AvgPool2d", "test_PReLU_2d")
LIGHT_MODELS = ("light_squeezenet", "light_inception_v2")
#: The project's own zoo (issue 20): ResNet, MobileNetV3, EfficientNet, ShuffleNet, ViT, BERT,
#: GPT-2, a transformer encoder, LSTM, GRU and an MLP, from both of torch's exporters.
ZOO = Path(__file__).parent / "zoo"
LENGTHS = {"N": 2, "B": 2, "batch": 2, "seq": 8, "batch_size": 2, "sequence_length": 8}

INTERESTING = [0, 1, -1, 2, 3, 7, 255, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63), 10**9, 15000]
OPS = ["Relu", "Add", "MatMul", "Reshape", "Concat", "Gather", "Loop", "Range", "Tile",
       "ConstantOfShape", "Expand", "Shape", "Slice", "Transpose", "Conv", "Softmax", "If",
       "Cast", "Squeeze", "Unsqueeze", "Flatten", "Gemm", "Pad", "NoSuchOp", ""]


def seeds() -> dict[str, bytes]:
    """The serialized models to mutate: three built here, networks from the onnx wheel and
    the zoo's."""
    out = {name: build().SerializeToString() for name, (build, _) in MODELS.items()}
    for name in TORCH_MODELS:
        path = DATA / "pytorch-converted" / name / "model.onnx"
        if path.is_file():
            out[name] = path.read_bytes()
    for name in LIGHT_MODELS:
        path = DATA / "light" / f"{name}.onnx"
        if path.is_file():
            out[name] = path.read_bytes()
    for path in sorted(ZOO.glob("*.onnx")):
        out[f"zoo_{path.stem}"] = path.read_bytes()
    return out


# -- mutations ----------------------------------------------------------------------------------
def _bytes(rng: random.Random, data: bytes) -> bytes:
    data = bytearray(data)
    kind = rng.choice(["flip", "flip", "cut", "insert", "zero"])
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
    elif kind == "cut":
        del data[rng.randrange(len(data)):]
    elif kind == "insert":
        i = rng.randrange(len(data))
        data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    else:
        i = rng.randrange(len(data))
        data[i:i + rng.randint(1, 64)] = b"\0" * 64
    return bytes(data)


def _names(model) -> list[str]:
    g = model.graph
    names = [v.name for v in list(g.input) + list(g.output)] + [i.name for i in g.initializer]
    return names + [o for n in g.node for o in n.output] + [""]


def _tensors(model) -> list:
    g = model.graph
    consts = [a.t for n in g.node for a in n.attribute if a.type == onnx.AttributeProto.TENSOR]
    return list(g.initializer) + consts


def _value_infos(model) -> list:
    g = model.graph
    return list(g.input) + list(g.output) + list(g.value_info)


def _edit_attribute(rng, model) -> None:
    attrs = [a for n in model.graph.node for a in n.attribute]
    if not attrs:
        return
    a = rng.choice(attrs)
    if a.type == onnx.AttributeProto.INT:
        a.i = rng.choice(INTERESTING)
    elif a.type == onnx.AttributeProto.INTS and a.ints:
        a.ints[rng.randrange(len(a.ints))] = rng.choice(INTERESTING)
    elif a.type == onnx.AttributeProto.FLOAT:
        a.f = rng.choice([0.0, -1.0, 1e30, float("nan"), float("inf")])
    elif a.type == onnx.AttributeProto.STRING:
        a.s = rng.choice([b"", b"reflect", b"NOTSET", b"\xff", b"linear"])
    else:
        a.name = rng.choice(["axis", "perm", "to", "group", "value", "bogus"])


def _edit_dims(rng, model) -> None:
    if rng.random() < 0.5 and _tensors(model):
        t = rng.choice(_tensors(model))
        if t.dims and rng.random() < 0.7:
            t.dims[rng.randrange(len(t.dims))] = rng.choice(INTERESTING)
        else:
            t.dims.append(rng.choice([1, 2, 15000]))
        return
    infos = [v for v in _value_infos(model) if v.type.tensor_type.shape.dim]
    if infos:
        dims = rng.choice(infos).type.tensor_type.shape.dim
        d = dims[rng.randrange(len(dims))]
        if rng.random() < 0.5:
            d.dim_value = rng.choice([0, 1, 3, 15000, 2**40])
        else:
            d.dim_param = rng.choice(["N", "B", "unknown", ""])


def _edit_type(rng, model) -> None:
    elem = rng.choice([0, 1, 2, 6, 7, 8, 9, 10, 11, 13, 16, 17, 23, 40])
    if rng.random() < 0.5 and _tensors(model):
        rng.choice(_tensors(model)).data_type = elem
    elif _value_infos(model):
        rng.choice(_value_infos(model)).type.tensor_type.elem_type = elem


def _edit_node(rng, model) -> None:
    nodes = model.graph.node
    if not nodes:
        return
    i = rng.randrange(len(nodes))
    kind = rng.choice(["drop", "duplicate", "swap", "op", "input", "output", "domain"])
    if kind == "drop":
        del nodes[i]
    elif kind == "duplicate":
        nodes.insert(rng.randrange(len(nodes) + 1), nodes[i])
    elif kind == "swap":
        j = rng.randrange(len(nodes))
        a, b = onnx.NodeProto(), onnx.NodeProto()
        a.CopyFrom(nodes[i])
        b.CopyFrom(nodes[j])
        nodes[i].CopyFrom(b)
        nodes[j].CopyFrom(a)
    elif kind == "op":
        nodes[i].op_type = rng.choice(OPS)
    elif kind == "input" and nodes[i].input:
        nodes[i].input[rng.randrange(len(nodes[i].input))] = rng.choice(_names(model))
    elif kind == "output":
        nodes[i].output[rng.randrange(len(nodes[i].output))] = rng.choice(_names(model))
    else:
        nodes[i].domain = rng.choice(["com.microsoft", "ai.onnx.ml", "x"])


def _edit_data(rng, model) -> None:
    tensors = [t for t in _tensors(model) if t.raw_data or t.float_data or t.int64_data]
    if not tensors:
        return
    t = rng.choice(tensors)
    if t.raw_data:
        t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)]
    elif t.float_data:
        del t.float_data[rng.randrange(len(t.float_data)):]
    else:
        t.int64_data[rng.randrange(len(t.int64_data))] = rng.choice(INTERESTING)


def _edit_opset(rng, model) -> None:
    if model.opset_import:
        model.opset_import[0].version = rng.choice([1, 6, 9, 11, 13, 17, 21, 23, 99])
    else:
        model.ir_version = rng.choice([0, 3, 4, 8, 99])


def _edit_graph(rng, model) -> None:
    g = model.graph
    kind = rng.choice(["no_output", "dup_init", "dup_input", "const_huge"])
    if kind == "no_output" and g.output:
        del g.output[rng.randrange(len(g.output))]
    elif kind == "dup_init" and g.initializer:
        g.initializer.append(g.initializer[rng.randrange(len(g.initializer))])
    elif kind == "dup_input" and g.input:
        g.input.append(g.input[rng.randrange(len(g.input))])
    else:
        shape = helper.make_tensor("s", TensorProto.INT64, [2], [15000, 15000])
        g.node.insert(0, helper.make_node("Constant", [], ["s_huge"], value=shape))
        g.node.insert(1, helper.make_node("ConstantOfShape", ["s_huge"], ["huge"]))
        if g.node[2:]:
            g.node[2].input.append("huge")


PROTO_EDITS = [_edit_attribute, _edit_dims, _edit_type, _edit_node, _edit_data, _edit_opset,
               _edit_graph]


def mutate(rng: random.Random, data: bytes) -> bytes:
    """One mutant of a serialized model: its bytes, or its fields edited 1 to 3 times."""
    if rng.random() < 0.3:
        return _bytes(rng, data)
    model = onnx.ModelProto()
    model.ParseFromString(data)
    for _ in range(rng.randint(1, 3)):
        rng.choice(PROTO_EDITS)(rng, model)
    return model.SerializeToString()


# -- running ------------------------------------------------------------------------------------
@dataclass
class Campaign:
    mutants: int = 0
    imported: int = 0
    refused: int = 0
    crashes: list[str] = field(default_factory=list)
    slowest: float = 0.0  # wall-clock seconds (the machine may be shared)
    slowest_name: str = ""
    slowest_cpu: float = 0.0  # seconds of this process's CPU time


def run_one(path: str) -> tuple[str, str]:
    """("imported" | "refused" | "crash", detail)."""
    try:
        dims = symbolic_dims(path)
        import_model(path, lengths={k: v for k, v in LENGTHS.items() if k in dims})
    except NgrulesError as e:
        text = str(e)
        if "\n" in text.strip() or not text.strip():
            return "crash", f"NgrulesError not one line: {text!r}"
        return "refused", text
    except RecursionError:
        return "crash", traceback.format_exc(limit=-4)
    except Exception:
        return "crash", traceback.format_exc(limit=-6)
    return "imported", ""


def run_one_bytes(data: bytes) -> tuple[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        Path(path).write_bytes(data)
        return run_one(path)


def campaign(count: int, seed: int = 0, models: dict[str, bytes] | None = None,
             folder: str | None = None) -> Campaign:
    models = models if models is not None else seeds()
    names = sorted(models)
    result = Campaign()
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        for i in range(count):
            rng = random.Random(seed * 1_000_003 + i)
            name = names[i % len(names)]
            path = os.path.join(tmp, "m.onnx")
            with open(path, "wb") as f:
                f.write(mutate(rng, models[name]))
            start, cpu = time.perf_counter(), time.process_time()
            status, detail = run_one(path)
            took = time.perf_counter() - start
            result.slowest_cpu = max(result.slowest_cpu, time.process_time() - cpu)
            result.mutants += 1
            if took > result.slowest:
                result.slowest, result.slowest_name = took, f"{name} #{i}"
            if status == "crash":
                result.crashes.append(f"{name} #{i} (seed {seed}): {detail}")
            elif status == "refused":
                result.refused += 1
            else:
                result.imported += 1
    return result


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--extra", action="append", default=[], help="more models (a glob)")
    args = p.parse_args(argv)
    faulthandler.enable()  # a crash inside onnx's C++ (a segmentation fault) shows where
    models = seeds()
    for pattern in args.extra:
        for path in sorted(glob.glob(pattern)):
            models[Path(path).stem] = Path(path).read_bytes()
    start = time.perf_counter()
    result = campaign(args.count, args.seed, models)
    print(f"{result.mutants} mutants of {len(models)} models in "
          f"{time.perf_counter() - start:.0f} s: {result.imported} imported, "
          f"{result.refused} refused with one line, {len(result.crashes)} crashes; slowest "
          f"{result.slowest:.2f} s ({result.slowest_name}; CPU time at most "
          f"{result.slowest_cpu:.2f} s); peak RSS {peak_rss_mb():.0f} MB")
    for crash in result.crashes[:20]:
        print("---", crash, sep="\n")
    return 1 if result.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
