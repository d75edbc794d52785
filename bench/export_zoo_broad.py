"""Write the broad zoo (issue 34, item 3): ONNX models that are not only the project's exports.

A developer script, never run by CI or by ngrules: torch is a developer tool only. Run it from
a separate environment that has torch, torchvision, transformers and onnxsim:

    /work/torchenv/bin/python bench/export_zoo_broad.py [--out out/zoo_broad] [--only STEM ...]

Every network has random weights (fixed seeds), nothing is downloaded, and the files (BERT-base
and GPT-2 small are ~0.5 GB each) go to `--out` (default `out/zoo_broad/`, git-ignored):

- `classic_<net>_op9.onnx`: the onnx package's light networks (`onnx/backend/test/data/light`,
  opset 9) with each weight their `ConstantOfShape` fills made an initializer of random values
  (convolution and matrix weights scaled by their fan-in; batchnorm scales near 1, variances
  positive);
- `<net>_<legacy|dynamo>_op<N>.onnx`: torchvision's mobilenet_v2/v3, shufflenet, squeezenet,
  efficientnet (full depth, 64x64 images), a ViT, an LSTM and a GRU, through both torch
  exporters at opsets 17, 18, 20 and 23 (a pair an exporter refuses is reported and skipped);
- transformers BERT, RoBERTa, DistilBERT (attention mask; token type ids where the model has
  them), GPT-2, Llama, Qwen2 and Phi decoders from small configs, legacy at 17 and dynamo at 18
  and 23; a BERT-base-sized encoder and a GPT-2-small-sized decoder (their configs' defaults),
  dynamo at 18.

Beside them, `onnxsim.json`: for every file, onnxsim's node count (Constant nodes not counted,
as `bench/zoo_status.py --broad` counts) and seconds, or why onnxsim failed.
"""

from __future__ import annotations

import argparse
import io
import json
import time
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
LIGHT = ["bvlc_alexnet", "zfnet512", "squeezenet", "resnet50", "shufflenet", "inception_v1",
         "inception_v2", "densenet121", "vgg19"]
BATCH, SEQ, VOCAB = 2, 8, 64


# -- the onnx package's classic networks --------------------------------------------------------
def _fill(rng, op: str, slot: int, shape: list[int]) -> np.ndarray:
    """Random values for input `slot` of an `op` node: scaled by fan-in for weights."""
    u = rng.uniform(-1, 1, shape)
    if op == "BatchNormalization":
        return {1: 1 + 0.1 * u, 4: 1 + 0.1 * np.abs(u)}.get(slot, 0.1 * u)
    if len(shape) >= 2:
        return u / np.sqrt(max(int(np.prod(shape[1:])), 1))
    return 0.01 * u


def classic(name: str, out: Path) -> Path:
    import onnx.backend.test

    source = Path(onnx.backend.test.__file__).parent / "data" / "light" / f"light_{name}.onnx"
    model = onnx.load(source)
    inits = {t.name: t for t in model.graph.initializer}
    users = {i: (n.op_type, k) for n in model.graph.node for k, i in enumerate(n.input)}
    rng = np.random.default_rng(0)
    kept = []
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = numpy_helper.to_array(inits[node.input[0]]).tolist()
            op, slot = users.get(node.output[0], ("", 0))
            value = _fill(rng, op, slot, shape).astype(np.float32)
            model.graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
        else:
            kept.append(node)
    del model.graph.node[:]
    model.graph.node.extend(kept)
    used = {i for n in kept for i in n.input}
    alive = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(alive)
    model.ir_version = max(model.ir_version, 4)  # initializers need not be graph inputs
    onnx.checker.check_model(model)
    path = out / f"classic_{name}_op9.onnx"
    onnx.save(model, path)
    return path


# -- torch models ------------------------------------------------------------------------------
def _image(size: int = 64) -> dict:
    import torch

    return {"x": torch.randn(BATCH, 3, size, size)}


def vision(name: str):
    import torchvision.models as tv

    build = {"mobilenet_v2": tv.mobilenet_v2, "mobilenet_v3": tv.mobilenet_v3_small,
             "shufflenet": tv.shufflenet_v2_x0_5, "squeezenet": tv.squeezenet1_1,
             "efficientnet": tv.efficientnet_b0}[name]
    return build(weights=None, num_classes=10), _image()


def vit():
    from torchvision.models import VisionTransformer

    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                              hidden_dim=64, mlp_dim=128, num_classes=10)
    return model, _image(32)


def recurrent(kind: str):
    import torch
    from torch import nn

    class Rnn(nn.Module):
        def __init__(self):
            super().__init__()
            cell = nn.LSTM if kind == "lstm" else nn.GRU
            self.rnn = cell(16, 32, num_layers=2, batch_first=True)

        def forward(self, x):
            return self.rnn(x)[0]

    return Rnn(), {"x": torch.randn(BATCH, SEQ, 16)}


def _tokens(types: bool) -> dict:
    import torch

    out = {"input_ids": torch.randint(0, VOCAB, (BATCH, SEQ))}
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    mask[1, SEQ - 3:] = 0
    out["attention_mask"] = mask
    if types:
        out["token_type_ids"] = torch.randint(0, 2, (BATCH, SEQ))
    return out


def transformer(name: str):
    """A transformers model from a small config (or, `*_base`, its config's defaults)."""
    import transformers as tf
    from torch import nn

    small = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, max_position_embeddings=64, vocab_size=VOCAB)
    eager = {"attn_implementation": "eager"}
    if name == "bert":
        model, types = tf.BertModel(tf.BertConfig(**small, **eager), add_pooling_layer=False), True
    elif name == "roberta":
        config = tf.RobertaConfig(**small, pad_token_id=1, **eager)
        model, types = tf.RobertaModel(config, add_pooling_layer=False), True
    elif name == "distilbert":
        config = tf.DistilBertConfig(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4,
                                     hidden_dim=128, max_position_embeddings=64, **eager)
        model, types = tf.DistilBertModel(config), False
    elif name == "gpt2":
        config = tf.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                               use_cache=False, bos_token_id=0, eos_token_id=0, **eager)
        model, types = tf.GPT2Model(config), False
    elif name in ("llama", "qwen2", "phi"):
        config_class = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config,
                        "phi": tf.PhiConfig}[name]
        config = config_class(**small, num_key_value_heads=2, use_cache=False, **eager)
        model, types = {"llama": tf.LlamaModel, "qwen2": tf.Qwen2Model,
                        "phi": tf.PhiModel}[name](config), False
    elif name == "bert_base":
        model = tf.BertModel(tf.BertConfig(**eager), add_pooling_layer=False)
        types = True
    elif name == "gpt2_small":
        model, types = tf.GPT2Model(tf.GPT2Config(use_cache=False, **eager)), False
    else:
        raise KeyError(name)
    inputs = _tokens(types)

    class Hidden(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, *tensors):
            return self.inner(**dict(zip(inputs, tensors))).last_hidden_state

    return Hidden(), inputs


TORCH = {**{n: (lambda n=n: vision(n)) for n in
            ("mobilenet_v2", "mobilenet_v3", "shufflenet", "squeezenet", "efficientnet")},
         "vit": vit, "lstm": lambda: recurrent("lstm"), "gru": lambda: recurrent("gru")}
TRANSFORMERS = ["bert", "roberta", "distilbert", "gpt2", "llama", "qwen2", "phi"]
GRID = [(False, 17), (False, 18), (False, 20), (False, 23),
        (True, 17), (True, 18), (True, 20), (True, 23)]
PLAN = ([(n, d, o) for n in TORCH for d, o in GRID]
        + [(n, d, o) for n in TRANSFORMERS for d, o in [(False, 17), (True, 18), (True, 23)]]
        + [("bert_base", True, 18), ("gpt2_small", True, 18)])


def export(name: str, dynamo: bool, opset: int, out: Path) -> Path:
    import torch

    torch.manual_seed(0)
    model, inputs = TORCH[name]() if name in TORCH else transformer(name)
    model.eval()
    names = list(inputs)
    path = out / f"{name}_{'dynamo' if dynamo else 'legacy'}_op{opset}.onnx"
    kwargs = {"input_names": names, "output_names": ["y"], "dynamo": dynamo,
              "opset_version": opset}
    if dynamo:
        kwargs["external_data"] = False
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        torch.onnx.export(model, tuple(inputs.values()), str(path), **kwargs)
    proto = onnx.load(str(path))
    written = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    if written != opset:
        path.unlink()
        raise RuntimeError(f"asked for opset {opset}, the exporter wrote {written}")
    for node in proto.graph.node:  # the dynamo exporter's stack traces
        del node.metadata_props[:]
    onnx.save(proto, str(path), save_as_external_data=proto.ByteSize() > 2**31 - 2**20)
    return path


def nodes(model) -> int:
    """ONNX nodes, `Constant` nodes not counted (an initializer written as a node)."""
    return sum(n.op_type != "Constant" for n in model.graph.node)


def simplify(path: Path) -> dict:
    try:
        import onnxsim

        start = time.process_time()
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            model, ok = onnxsim.simplify(str(path))
        seconds = time.process_time() - start
        if not ok:
            return {"error": "onnxsim's own check failed"}
        return {"nodes": nodes(model), "all_nodes": len(model.graph.node), "seconds": seconds}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:120]}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "out" / "zoo_broad"))
    parser.add_argument("--only", nargs="*", help="file stems (or their prefixes) to write")
    parser.add_argument("--no-onnxsim", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [(f"classic_{n}_op9", lambda n=n: classic(n, out)) for n in LIGHT]
    jobs += [(f"{n}_{'dynamo' if d else 'legacy'}_op{o}", lambda n=n, d=d, o=o:
              export(n, d, o, out)) for n, d, o in PLAN]
    table_path = out / "onnxsim.json"
    table = json.loads(table_path.read_text()) if table_path.exists() else {}
    for stem, job in jobs:
        if args.only and not any(stem.startswith(p) for p in args.only):
            continue
        try:
            path = job()
        except Exception as exc:  # an exporter's refusal: reported, the rest go on
            print(f"FAILED {stem}: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}")
            traceback.print_exc(limit=1)
            continue
        size = nodes(onnx.load(str(path), load_external_data=False))
        if not args.no_onnxsim:
            table[path.stem] = simplify(path)
            table_path.write_text(json.dumps(table, indent=1, sort_keys=True))
        print(f"{path.name}: {path.stat().st_size / 2**20:.1f} MiB, {size} nodes, "
              f"onnxsim {table.get(path.stem)}", flush=True)


if __name__ == "__main__":
    main()
