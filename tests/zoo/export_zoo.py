"""Export the zoo: small untrained networks from torch, torchvision and transformers as ONNX.

A developer script, not part of ngrules or its tests: torch is a developer tool only. Run it
from a separate environment that has torch (never the project's venv):

    python -m venv /work/torchvenv
    /work/torchvenv/bin/pip install torch==2.14.1 torchvision==0.29.1 transformers onnx onnxscript
    /work/torchvenv/bin/python tests/zoo/export_zoo.py [--only NAME ...]

Each network is built from its config with small widths and depths and a fixed seed, put in
eval mode, and exported with both `torch.onnx.export` exporters (the legacy TorchScript one,
`dynamo=False`, and the dynamo one), each at its default opset and at opset 17. A pair that an
exporter cannot write is reported and skipped. The files land beside this script as
`<model>_<exporter>_op<opset>.onnx` (nodes' `metadata_props`, the dynamo exporter's stack
traces, are dropped: they were half of each file); `README.md` lists them with their inputs
(rewritten by this script, between its markers).
"""

from __future__ import annotations

import argparse
import io
import traceback
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import onnx
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
SEED = 0
BATCH = 2
SEQ = 8
VOCAB = 64


def resnet() -> tuple[nn.Module, dict]:
    """ResNet-18's shape (stem, four stages of basic blocks, pooling, a classifier), narrowed."""
    from torchvision.models.resnet import BasicBlock

    def stage(cin: int, cout: int, stride: int) -> nn.Module:
        down = None
        if stride != 1 or cin != cout:
            down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        return nn.Sequential(BasicBlock(cin, cout, stride, down), BasicBlock(cout, cout))

    model = nn.Sequential(
        nn.Conv2d(3, 4, 7, 2, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
        stage(4, 4, 1), stage(4, 8, 2), stage(8, 12, 2), stage(12, 16, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10),
    )
    return model, {"x": torch.randn(BATCH, 3, 32, 32)}


def resnet_bn() -> tuple[nn.Module, dict]:
    """`resnet` with statistics and affine parameters as training leaves them (not 0 and 1),
    exported with its BatchNormalization nodes kept (EXPORT_OPTIONS): a CNN for `inference`
    to fold."""
    model, inputs = resnet()
    for layer in model.modules():
        if isinstance(layer, nn.BatchNorm2d):
            c = layer.num_features
            layer.running_mean.copy_(torch.randn(c) * 0.1)
            layer.running_var.copy_(torch.rand(c) + 0.5)
            layer.weight.data.copy_(torch.rand(c) + 0.5)
            layer.bias.data.copy_(torch.randn(c) * 0.1)
    return model, inputs


def mobilenet_v3() -> tuple[nn.Module, dict]:
    """MobileNetV3-small's blocks at a quarter of its width, its first eight, a narrow head."""
    from torchvision.models.mobilenetv3 import MobileNetV3, _mobilenet_v3_conf

    setting, _ = _mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.25)
    model = MobileNetV3(setting[:8], last_channel=64, num_classes=10)
    return model, {"x": torch.randn(BATCH, 3, 32, 32)}


def efficientnet() -> tuple[nn.Module, dict]:
    """EfficientNet-b0's blocks at a quarter of its width, one per stage, its first four stages."""
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf

    setting, _ = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.34)
    model = EfficientNet(setting[:4], dropout=0.2, last_channel=64, num_classes=10)
    return model, {"x": torch.randn(BATCH, 3, 32, 32)}


def shufflenet() -> tuple[nn.Module, dict]:
    from torchvision.models import ShuffleNetV2

    model = ShuffleNetV2([1, 1, 1], [8, 16, 32, 64, 128], num_classes=10)
    return model, {"x": torch.randn(BATCH, 3, 32, 32)}


def vit() -> tuple[nn.Module, dict]:
    from torchvision.models import VisionTransformer

    model = VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
        num_classes=10,
    )
    return model, {"x": torch.randn(BATCH, 3, 32, 32)}


def transformer_encoder() -> tuple[nn.Module, dict]:
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    return model, {"x": torch.randn(BATCH, SEQ, 32)}


class _LastHidden(nn.Module):
    """A transformers model returning only its last hidden state (a tensor, not a dict)."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, attention_mask=None):
        if attention_mask is None:
            return self.inner(input_ids=input_ids).last_hidden_state
        return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def _token_inputs(mask: bool) -> dict:
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    if not mask:
        return {"input_ids": ids}
    attention = torch.ones(BATCH, SEQ, dtype=torch.int64)
    attention[1, SEQ - 3:] = 0
    return {"input_ids": ids, "attention_mask": attention}


def bert() -> tuple[nn.Module, dict]:
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32, attn_implementation="eager",
    )
    return _LastHidden(BertModel(config, add_pooling_layer=False)), _token_inputs(mask=True)


def gpt2() -> tuple[nn.Module, dict]:
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(
        vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=32, use_cache=False,
        bos_token_id=0, eos_token_id=0, attn_implementation="eager",
    )
    return _LastHidden(GPT2Model(config)), _token_inputs(mask=False)


class _Recurrent(nn.Module):
    """An LSTM or GRU returning its output sequence only."""

    def __init__(self, cell: type[nn.Module]):
        super().__init__()
        self.rnn = cell(8, 16, num_layers=1, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


def lstm() -> tuple[nn.Module, dict]:
    return _Recurrent(nn.LSTM), {"x": torch.randn(BATCH, SEQ, 8)}


def gru() -> tuple[nn.Module, dict]:
    return _Recurrent(nn.GRU), {"x": torch.randn(BATCH, SEQ, 8)}


def mlp_dynamic() -> tuple[nn.Module, dict]:
    """An MLP whose batch dimension stays symbolic (`batch`) in the exported model."""
    model = nn.Sequential(
        nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 4)
    )
    return model, {"x": torch.randn(BATCH, 16)}


MODELS: dict[str, Callable[[], tuple[nn.Module, dict]]] = {
    "resnet": resnet,
    "resnet_bn": resnet_bn,
    "mobilenet_v3": mobilenet_v3,
    "efficientnet": efficientnet,
    "shufflenet": shufflenet,
    "vit": vit,
    "transformer_encoder": transformer_encoder,
    "bert": bert,
    "gpt2": gpt2,
    "lstm": lstm,
    "gru": gru,
    "mlp_dynamic": mlp_dynamic,
}

#: Models whose first dimension is exported as symbolic.
DYNAMIC_BATCH = {"mlp_dynamic"}

#: Exporter options of a model, per exporter: both exporters fold an eval-mode batchnorm into
#: the convolution before it unless told not to (the legacy one keeps it when asked to preserve
#: the training mode, dynamo without its optimizer, which also writes a bias-free convolution's
#: zero bias as Shape/Expand/CastLike nodes).
EXPORT_OPTIONS: dict[str, dict[bool, dict]] = {
    "resnet_bn": {False: {"training": torch.onnx.TrainingMode.PRESERVE},
                  True: {"optimize": False}},
}

#: The opsets a model is exported at (None: the exporter's default), where not (None, 17).
OPSETS = {"resnet_bn": (None,)}


def export_one(name: str, dynamo: bool, opset: int | None) -> Path:
    """Export one model with one exporter at one opset (None: the exporter's default)."""
    torch.manual_seed(SEED)
    model, inputs = MODELS[name]()
    model.eval()
    names = list(inputs)
    kwargs: dict = {"input_names": names, "output_names": ["y"], "dynamo": dynamo}
    if opset is not None:
        kwargs["opset_version"] = opset
    if name in DYNAMIC_BATCH:
        if dynamo:
            kwargs["dynamic_shapes"] = tuple({0: torch.export.Dim("batch")} for _ in names)
        else:
            kwargs["dynamic_axes"] = {n: {0: "batch"} for n in names + ["y"]}
    if dynamo:
        kwargs["external_data"] = False
    kwargs.update(EXPORT_OPTIONS.get(name, {}).get(dynamo, {}))
    buffer = io.StringIO()
    tmp = HERE / f".{name}.tmp.onnx"
    # Not under no_grad: in eval mode without it, torch's attention layers take their fused fast
    # path (`_native_multi_head_attention`), which the legacy exporter cannot write.
    with redirect_stdout(buffer), redirect_stderr(buffer):
        torch.onnx.export(model, tuple(inputs.values()), str(tmp), **kwargs)
    model_proto = onnx.load(str(tmp))
    tmp.unlink()
    written = next(o.version for o in model_proto.opset_import if o.domain in ("", "ai.onnx"))
    path = HERE / f"{name}_{'dynamo' if dynamo else 'legacy'}_op{written}.onnx"
    model_proto.producer_version = torch.__version__
    for node in model_proto.graph.node:  # the dynamo exporter's stack traces: half the file
        del node.metadata_props[:]
    onnx.checker.check_model(model_proto, full_check=True)
    onnx.save(model_proto, str(path))
    return path


def _describe_inputs(path: Path) -> str:
    model = onnx.load(str(path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}
    parts = []
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        t = vi.type.tensor_type
        dims = [d.dim_param or str(d.dim_value) for d in t.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name
        parts.append(f"`{vi.name}` {dtype}[{', '.join(dims)}]")
    return ", ".join(parts)


def write_table() -> None:
    """Rewrite the table of files in README.md between its markers."""
    readme = HERE / "README.md"
    rows = ["| file | KiB | ONNX nodes | inputs |", "|---|---:|---:|---|"]
    for path in sorted(HERE.glob("*.onnx")):
        nodes = len(onnx.load(str(path), load_external_data=False).graph.node)
        kib = path.stat().st_size / 1024
        rows.append(f"| `{path.name}` | {kib:.0f} | {nodes} | {_describe_inputs(path)} |")
    text = readme.read_text()
    start, end = "<!-- zoo table -->", "<!-- end zoo table -->"
    head, rest = text.split(start)
    _, tail = rest.split(end)
    readme.write_text(f"{head}{start}\n" + "\n".join(rows) + f"\n{end}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=sorted(MODELS), choices=sorted(MODELS))
    args = parser.parse_args()
    for name in args.only:
        for exporter in ("legacy", "dynamo"):  # resnet's glob must not reach resnet_bn's files
            for stale in HERE.glob(f"{name}_{exporter}_op*.onnx"):
                stale.unlink()
        for dynamo in (False, True):
            for opset in OPSETS.get(name, (None, 17)):
                label = f"{name} {'dynamo' if dynamo else 'legacy'} opset {opset or 'default'}"
                try:
                    path = export_one(name, dynamo, opset)
                except Exception as exc:  # an exporter's refusal: reported, the rest goes on
                    print(f"FAILED {label}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
                    traceback.print_exc(limit=1)
                    continue
                print(f"{label}: {path.name} ({path.stat().st_size / 1024:.0f} KiB)")
    write_table()


if __name__ == "__main__":
    main()
