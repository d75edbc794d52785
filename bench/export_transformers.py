"""Export transformers models with symbolic batch and sequence (issue 34, items 4 and 5).

A developer script, never run by CI or by ngrules: torch is a developer tool only. Run it from
a separate environment that has torch (never the project's venv):

    python -m venv /work/torchenv
    /work/torchenv/bin/pip install torch==2.14.1 transformers onnx onnxscript
    /work/torchenv/bin/python bench/export_transformers.py [--out DIR] [--only NAME ...]

Every model is built from its transformers config class with random weights (a fixed seed):
nothing is downloaded. The files (large ones: GPT-2 small is ~500 MB) are written to `--out`
(default /tmp/ngrules-transformers), never committed:

- `llama_tiny_dynamo.onnx`: a Llama of 2 layers, hidden 64, grouped-query attention (4 query
  heads, 2 key/value heads), dynamo exporter, symbolic `batch` and `seq`;
- `bert_mask_dynamo.onnx`: a BERT with an attention mask (and token type ids), dynamo exporter,
  symbolic `batch` and `seq`;
- `gpt2_small_legacy.onnx`: GPT-2 small's config (12 layers, width 768), the legacy
  (TorchScript) exporter, symbolic `batch` and `seq`;
- `vit_tiny_{dynamo,legacy}.onnx`: a ViT image classifier (the Gemm of its head), batch symbolic.
"""

from __future__ import annotations

import argparse
import io
import traceback
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import onnx
import torch
from torch import nn

SEED = 0
BATCH, SEQ = 2, 16


class _Hidden(nn.Module):
    """A transformers model returning one tensor (its last hidden state, or its logits)."""

    def __init__(self, inner: nn.Module, field: str = "last_hidden_state"):
        super().__init__()
        self.inner, self.field, self.names = inner, field, ()

    def forward(self, *tensors):
        return getattr(self.inner(**dict(zip(self.names, tensors))), self.field)


def _tokens(vocab: int, mask: bool = True, types: bool = False) -> dict:
    out = {"input_ids": torch.randint(0, vocab, (BATCH, SEQ))}
    if mask:
        attention = torch.ones(BATCH, SEQ, dtype=torch.int64)
        attention[1, SEQ - 5:] = 0
        out["attention_mask"] = attention
    if types:
        out["token_type_ids"] = torch.zeros(BATCH, SEQ, dtype=torch.int64)
    return out


def llama_tiny():
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, use_cache=False,
                         attn_implementation="eager")
    return _Hidden(LlamaModel(config)), _tokens(128), True


def bert_mask(attention: str = "eager"):
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=128,
                        max_position_embeddings=256, attn_implementation=attention)
    model = BertModel(config, add_pooling_layer=False)
    return _Hidden(model), _tokens(128), True  # token types from its buffer: a GatherElements


def bert_sdpa():
    """`bert_mask` with transformers' default attention (its mask made by index arithmetic)."""
    return bert_mask("sdpa")


def gpt2_small():
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(use_cache=False, attn_implementation="eager")  # 124M parameters
    return _Hidden(GPT2Model(config)), _tokens(config.vocab_size), False


def vit_tiny():
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=128, num_labels=10,
                       attn_implementation="eager")
    model = _Hidden(ViTForImageClassification(config), "logits")
    return model, {"pixel_values": torch.randn(BATCH, 3, 32, 32)}, None


MODELS = {"llama_tiny": llama_tiny, "bert_mask": bert_mask, "bert_sdpa": bert_sdpa,
          "gpt2_small": gpt2_small, "vit_tiny": vit_tiny}


def _dynamic(inputs: dict, dynamo: bool, seq: bool):
    """Batch (and sequence, for token inputs) symbolic, named `batch` and `seq`."""
    if dynamo:
        batch, length = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", max=256)
        return {k: {0: batch, **({1: length} if seq else {})} for k in inputs}
    return {k: {0: "batch", **({1: "seq"} if seq else {})} for k in inputs}


def export(name: str, out: Path, dynamo: bool) -> Path:
    torch.manual_seed(SEED)
    model, inputs, _ = MODELS[name]()
    model.eval()
    seq = name != "vit_tiny"
    path = out / f"{name}_{'dynamo' if dynamo else 'legacy'}.onnx"
    names = list(inputs)
    model.names = tuple(names)
    args = tuple(inputs.values())
    with torch.no_grad(), redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        if dynamo:
            shapes = tuple(_dynamic(inputs, True, seq).values())
            program = torch.onnx.export(model, args, dynamo=True, dynamic_shapes=(shapes,),
                                        input_names=names, output_names=["y"])
            program.save(str(path))
        else:
            torch.onnx.export(model, args, str(path), dynamo=False,
                              input_names=names, output_names=["y"], opset_version=17,
                              dynamic_axes={**_dynamic(inputs, False, seq),
                                            "y": {0: "batch", **({1: "seq"} if seq else {})}})
    m = onnx.load(str(path))
    for node in m.graph.node:  # the dynamo exporter's stack traces
        del node.metadata_props[:]
    onnx.save(m, str(path))
    return path


PLAN = [("llama_tiny", True), ("bert_mask", True), ("bert_sdpa", True), ("gpt2_small", False),
        ("vit_tiny", True), ("vit_tiny", False)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/ngrules-transformers")
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, dynamo in PLAN:
        if args.only and name not in args.only:
            continue
        try:
            path = export(name, out, dynamo)
            dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
                    for i in onnx.load(str(path), load_external_data=False).graph.input]
            print(f"{path}: {path.stat().st_size} bytes, inputs {dims}")
        except Exception:  # a model an exporter cannot write: reported, the rest go on
            print(f"{name} ({'dynamo' if dynamo else 'legacy'}): FAILED")
            traceback.print_exc()


if __name__ == "__main__":
    main()
