"""Export the ten commonest transformer forms from PyTorch to tests/data/exported_forms/*.onnx.

A developer script (needs torch; ngrules and its tests never import it): each form (and SiLU
once more after a convolution, whose output the importer reorders) is a tiny module (hidden 8,
sequence 4, small random weights) exported with torch.onnx.export, legacy exporter, opset 17;
GELU and RMSNorm also by the dynamo exporter, opset 18. The files are committed:
tests/test_exported_forms.py imports them and checks that the rules of
docs/examples/exported_forms.rules fuse each one (docs/exported-forms.md).

    /work/torchenv/bin/python bench/export_forms.py
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "exported_forms"
B, S, H, HEADS, KV_HEADS = 1, 4, 8, 4, 2
D = H // HEADS


class Gelu(nn.Module):
    def forward(self, x):
        return nn.functional.gelu(x)


class Silu(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


class ConvSilu(nn.Module):  # a convolution's output: channels first in ONNX, not in the IR
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)

    def forward(self, x):
        d = self.conv(x)
        return d * torch.sigmoid(d)


class RmsNorm(nn.Module):  # Llama's
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(H) + 0.5)

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


class LayerNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(H)
        nn.init.uniform_(self.norm.weight, 0.5, 1.5)
        nn.init.uniform_(self.norm.bias, -0.5, 0.5)

    def forward(self, x):
        return self.norm(x)


class Attention(nn.Module):  # softmax(q·kᵀ/√d + mask)·v
    def forward(self, q, k, v, mask):
        scores = q @ k.transpose(-1, -2) / math.sqrt(D) + mask
        return torch.softmax(scores, dim=-1) @ v


class Rotary(nn.Module):  # Llama's rotate_half
    def forward(self, x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin


class BiasGelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(H, H)

    def forward(self, x):
        return nn.functional.gelu(self.linear(x))


class ResidualNorm(nn.Module):  # BERT's post-norm: LayerNorm(x + sublayer(x))
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(H)
        nn.init.uniform_(self.norm.weight, 0.5, 1.5)
        nn.init.uniform_(self.norm.bias, -0.5, 0.5)

    def forward(self, x, skip):
        return self.norm(x + skip)


class GroupedQueryAttention(nn.Module):  # HEADS query heads share KV_HEADS key/value heads
    def forward(self, q, k, v):
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D)
        return torch.softmax(scores, dim=-1) @ v


class CausalMask(nn.Module):  # scores where j <= i, -inf above the diagonal
    def forward(self, scores):
        causal = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)
        return torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)


torch.manual_seed(0)  # the weights and example inputs: the same files on every run


def _r(*shape):
    return torch.randn(*shape)


FORMS = {
    "gelu": (Gelu(), (_r(B, S, H),), ["x"]),
    "silu": (Silu(), (_r(B, S, H),), ["x"]),
    "silu_conv": (ConvSilu(), (_r(1, 2, 5, 5),), ["x"]),
    "rmsnorm": (RmsNorm(), (_r(B, S, H),), ["x"]),
    "layernorm": (LayerNorm(), (_r(B, S, H),), ["x"]),
    "attention_mask": (Attention(), (_r(B, HEADS, S, D), _r(B, HEADS, S, D), _r(B, HEADS, S, D),
                                     _r(B, 1, S, S)), ["q", "k", "v", "mask"]),
    "rotary": (Rotary(), (_r(B, HEADS, S, D), _r(S, D), _r(S, D)), ["x", "cos", "sin"]),
    "bias_gelu": (BiasGelu(), (_r(B, S, H),), ["x"]),
    "residual_norm": (ResidualNorm(), (_r(B, S, H), _r(B, S, H)), ["x", "skip"]),
    "gqa": (GroupedQueryAttention(), (_r(B, HEADS, S, D), _r(B, KV_HEADS, S, D),
                                      _r(B, KV_HEADS, S, D)), ["q", "k", "v"]),
    "causal_mask": (CausalMask(), (_r(B, HEADS, S, S),), ["scores"]),
}


#: Forms exported once more by the dynamo exporter (opset 18), which spells them differently.
DYNAMO = ["gelu", "rmsnorm"]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    runs = [(name, name, False, 17) for name in FORMS]
    runs += [(f"{name}_dynamo", name, True, 18) for name in DYNAMO]
    for file, name, dynamo, opset in runs:
        module, args, inputs = FORMS[name]
        path = OUT / f"{file}.onnx"
        options = {"optimize": True, "external_data": False} if dynamo else {}
        torch.onnx.export(module.eval(), args, str(path), input_names=inputs, output_names=["y"],
                          opset_version=opset, dynamo=dynamo, **options)
        print(f"{path.name}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
