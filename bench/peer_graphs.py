"""The graphs of TASO's and Tensat's evaluation rebuilt as ONNX models, at sizes a CPU runs
in milliseconds (issue 36, item 4; measured by `bench/saturate_peers.py`).

The architectures are the ones TASO's and Tensat's sources define (their examples build them
with their own graph APIs); each is defined here again with onnx.helper, smaller:

- BERT: 8 self-attention layers, 16 heads, hidden 1024, sequence 64, batch 16, input relu;
  here 2 layers, 4 heads, hidden 128, sequence 32, batch 1 (each layer's attention output
  feeds its output projection).
- NasRNN: 5 steps of the NAS recurrent cell (8 combines x W1 + h W2, relu/sigmoid/tanh
  mixes), hidden 512; here hidden 128.
- ResNeXt-50: stem 7x7/2 and max pool, blocks 3/4/6/3 of 1x1, grouped 3x3 (32 groups), 1x1,
  widths 128-1024; here widths / 8, 8 groups, 64x64.
- NasNet-A: stem, 3 stages of 5 normal cells and a reduction cell (separable convs, pools,
  adds, concat), 128-512 channels; here 2 stages of 2 normal cells, 16-32 channels, 64x64.
- SqueezeNet 1.0: 8 fire modules (1x1 squeeze; 1x1 and 3x3 expand, concatenated); here
  channels / 4, 64x64.
- VGG-19: 16 3x3 convs, 3 fully connected; here `big_models.vgg19` at width 16, 64x64.
- Inception-v3: stem, 3 A modules, B, 4 C modules (1x7/7x1), D, 2 E modules; here the stem,
  2 A, B and 2 C modules, about 1/8 of the channels, 75x75.

Weights are random (seeded), biases present where the peers' convs have none (ONNX exporters
write one for most layers); every conv keeps its spatial size with symmetric padding of k//2
(TASO's "SAME"). Run: `python bench/peer_graphs.py [--out DIR]` writes `DIR/<name>.onnx`
(default `bench/.peer_graphs/`, git-ignored).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from big_models import _Net, vgg19  # noqa: E402  (bench/big_models.py)

OUT = Path(__file__).resolve().parent / ".peer_graphs"


class Net(_Net):
    """`_Net` with the ops these graphs need besides Conv, BatchNormalization and Gemm."""

    def conv2d(self, x: str, c_in: int, c_out: int, k=3, stride: int = 1, groups: int = 1,
               relu: bool = True) -> str:
        kh, kw = (k, k) if isinstance(k, int) else k
        w = self.weight([c_out, c_in // groups, kh, kw], (2.0 / (c_in // groups * kh * kw)) ** 0.5)
        y = self.op("Conv", [x, w, self.weight([c_out], 0.01)], kernel_shape=[kh, kw],
                    strides=[stride, stride], pads=[kh // 2, kw // 2, kh // 2, kw // 2],
                    group=groups)
        return self.op("Relu", [y]) if relu else y

    def pool(self, x: str, kind: str, k: int, stride: int) -> str:
        return self.op(kind, [x], kernel_shape=[k, k], strides=[stride, stride],
                       pads=[k // 2] * 4)

    def matmul(self, x: str, fan_in: int, fan_out: int) -> str:
        return self.op("MatMul", [x, self.weight([fan_in, fan_out], fan_in ** -0.5)])

    def const(self, values, name: str) -> str:
        import numpy as np
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.asarray(values, np.int64), name))
        return name

    def finish(self, name: str, inputs: dict[str, list[int]], out: str, out_shape):
        h = self.h
        self.nodes[-1].output[0] = "y" if self.nodes[-1].output[0] == out else \
            self.nodes[-1].output[0]
        graph = h.make_graph(self.nodes, name,
                             [h.make_tensor_value_info(n, 1, s) for n, s in inputs.items()],
                             [h.make_tensor_value_info("y", 1, out_shape)], self.inits)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
        model.ir_version = 8
        return model


def bert(layers: int = 2, heads: int = 4, hidden: int = 128, seq: int = 32):
    """Self-attention layers as TASO's BERT: x Wq, x Wk, x Wv, heads split, softmax(q k^T) v,
    heads joined, times Wo."""
    net = Net(1)
    dk = hidden // heads
    split = net.const([seq, heads, dk], "heads_shape")
    join = net.const([seq, hidden], "joined_shape")
    t = net.op("Relu", ["x"])
    for _ in range(layers):
        q, k, v = (net.op("Reshape", [net.matmul(t, hidden, hidden), split]) for _ in range(3))
        q = net.op("Transpose", [q], perm=[1, 0, 2])
        k = net.op("Transpose", [k], perm=[1, 2, 0])
        v = net.op("Transpose", [v], perm=[1, 0, 2])
        att = net.op("Softmax", [net.op("MatMul", [q, k])], axis=-1)
        o = net.op("Transpose", [net.op("MatMul", [att, v])], perm=[1, 0, 2])
        t = net.matmul(net.op("Reshape", [o, join]), hidden, hidden)
    return net.finish("bert", {"x": [seq, hidden]}, t, [seq, hidden])


def nasrnn(steps: int = 5, hidden: int = 128):
    """The NAS recurrent cell of TASO's and Tensat's NasRNN, `steps` steps."""
    net = Net(2)
    state = net.weight([1, hidden], 0.1)

    def combine(x, h):
        return net.op("Add", [net.matmul(x, hidden, hidden), net.matmul(h, hidden, hidden)])

    for i in range(steps):
        t = [combine(f"x{i}", state) for _ in range(8)]
        act = {n: (lambda a, n=n: net.op(n, [a])) for n in ("Relu", "Sigmoid", "Tanh")}
        m0 = net.op("Add", [act["Relu"](t[0]), act["Sigmoid"](t[3])])
        m1 = net.op("Add", [act["Sigmoid"](t[1]), act["Tanh"](t[2])])
        m2 = net.op("Mul", [act["Sigmoid"](t[4]), act["Tanh"](t[5])])
        m3 = net.op("Mul", [act["Sigmoid"](t[6]), act["Relu"](t[7])])
        m4 = net.op("Add", [act["Sigmoid"](m1), act["Tanh"](m2)])
        m5 = net.op("Mul", [act["Tanh"](m0), act["Tanh"](m3)])
        m6 = net.op("Mul", [act["Tanh"](m4), act["Tanh"](m5)])
        state = act["Tanh"](m6)
    return net.finish("nasrnn", {f"x{i}": [1, hidden] for i in range(steps)}, state,
                      [1, hidden])


def resnext50(scale: int = 8, groups: int = 8, size: int = 64):
    """ResNeXt-50 (32x4d's layout) with widths / `scale` and `groups` groups."""
    net = Net(3)
    t = net.conv2d("x", 3, 64 // scale, 7, 2)
    t = net.pool(t, "MaxPool", 3, 2)
    c_in = 64 // scale
    for width, blocks in ((128, 3), (256, 4), (512, 6), (1024, 3)):
        c = width // scale
        for b in range(blocks):
            stride = 2 if b == 0 and width > 128 else 1
            a = net.conv2d(t, c_in, c, 1)
            a = net.conv2d(a, c, c, 3, stride, groups)
            a = net.conv2d(a, c, 2 * c, 1, relu=False)
            skip = t if stride == 1 and c_in == 2 * c else net.conv2d(t, c_in, 2 * c, 1, stride)
            t, c_in = net.op("Relu", [net.op("Add", [skip, a])]), 2 * c
    return net.finish("resnext50", {"x": [1, 3, size, size]}, t,
                      [1, c_in, size // 32, size // 32])


def _separable(net: Net, x: str, c: int, k: int, stride: int) -> str:
    t = net.conv2d(x, c, c, k, stride, groups=c, relu=False)
    return net.conv2d(t, c, c, 1, relu=False)


def _normal_cell(net: Net, prev: str, cur: str, c_prev: int, c_cur: int, c: int) -> str:
    cur = net.conv2d(cur, c_cur, c, 1)
    prev = net.conv2d(prev, c_prev, c, 1)
    avg = lambda a: net.pool(a, "AveragePool", 3, 1)  # noqa: E731
    branches = [_separable(net, cur, c, 3, 1), cur, _separable(net, prev, c, 3, 1),
                _separable(net, cur, c, 3, 1), avg(cur), prev, avg(prev), avg(prev),
                _separable(net, prev, c, 3, 1), _separable(net, prev, c, 3, 1)]
    outs = [net.op("Add", branches[2 * i: 2 * i + 2]) for i in range(5)]
    return net.op("Concat", outs, axis=1)


def _reduction_cell(net: Net, prev: str, cur: str, c_prev: int, c_cur: int, c: int) -> str:
    cur = net.conv2d(cur, c_cur, c, 1)
    prev = net.conv2d(prev, c_prev, c, 1)
    o0 = net.op("Add", [_separable(net, prev, c, 7, 2), _separable(net, cur, c, 5, 2)])
    o1 = net.op("Add", [net.pool(cur, "MaxPool", 3, 2), _separable(net, prev, c, 7, 2)])
    o2 = net.op("Add", [net.pool(cur, "AveragePool", 3, 2), _separable(net, prev, c, 5, 2)])
    o3 = net.op("Add", [net.pool(cur, "MaxPool", 3, 2), _separable(net, o0, c, 3, 1)])
    o4 = net.op("Add", [net.pool(o0, "AveragePool", 3, 1), o1])
    return net.op("Concat", [o0, o1, o2, o3, o4], axis=1)


def nasnet_a(stages: int = 2, cells: int = 2, channels: int = 16, size: int = 64):
    """NasNet-A as TASO's: normal cells then a reduction cell per stage, channels doubling."""
    net = Net(4)
    t = net.conv2d("x", 3, channels, 7, 2)
    t = net.pool(t, "MaxPool", 3, 2)
    c_t, c = channels, channels
    for _ in range(stages):
        prev, cur, c_prev, c_cur = t, t, c_t, c_t
        for _ in range(cells):
            prev, cur, c_prev, c_cur = cur, _normal_cell(net, prev, cur, c_prev, c_cur, c), \
                c_cur, 5 * c
        c *= 2
        t, c_t = _reduction_cell(net, prev, cur, c_prev, c_cur, c), 5 * c
        size_now = None  # noqa: F841 (spatial size halves per reduction cell)
    out = size // 4 // (2 ** stages)
    return net.finish("nasnet_a", {"x": [1, 3, size, size]}, t, [1, c_t, out, out])


def squeezenet(scale: int = 4, size: int = 64, classes: int = 100):
    """SqueezeNet 1.0: fire modules (squeeze 1x1, expand 1x1 and 3x3 concatenated)."""
    net = Net(5)
    fires = [(16, 64), (16, 64), (32, 128), "M", (32, 128), (48, 192), (48, 192), (64, 256),
             "M", (64, 256)]
    t = net.pool(net.conv2d("x", 3, 96 // scale, 7, 2), "MaxPool", 3, 2)
    c_in = 96 // scale
    for fire in fires:
        if fire == "M":
            t = net.pool(t, "MaxPool", 3, 2)
            continue
        s, e = fire[0] // scale, fire[1] // scale
        sq = net.conv2d(t, c_in, s, 1)
        t = net.op("Concat", [net.conv2d(sq, s, e, 1), net.conv2d(sq, s, e, 3)], axis=1)
        c_in = 2 * e
    t = net.conv2d(t, c_in, classes, 1)
    t = net.op("GlobalAveragePool", [t])
    return net.finish("squeezenet", {"x": [1, 3, size, size]}, t, [1, classes, 1, 1])


def _inception_a(net: Net, x: str, c_in: int, pool_c: int) -> tuple[str, int]:
    b1 = net.conv2d(x, c_in, 8, 1)
    b2 = net.conv2d(net.conv2d(x, c_in, 6, 1), 6, 8, 5)
    b3 = net.conv2d(net.conv2d(net.conv2d(x, c_in, 8, 1), 8, 12, 3), 12, 12, 3)
    b4 = net.conv2d(net.pool(x, "AveragePool", 3, 1), c_in, pool_c, 1)
    return net.op("Concat", [b1, b2, b3, b4], axis=1), 28 + pool_c


def _inception_b(net: Net, x: str, c_in: int) -> tuple[str, int]:
    b1 = net.conv2d(x, c_in, 48, 3, 2)
    b2 = net.conv2d(net.conv2d(net.conv2d(x, c_in, 8, 1), 8, 12, 3), 12, 12, 3, 2)
    b3 = net.pool(x, "MaxPool", 3, 2)
    return net.op("Concat", [b1, b2, b3], axis=1), 60 + c_in


def _inception_c(net: Net, x: str, c_in: int, c7: int) -> tuple[str, int]:
    b1 = net.conv2d(x, c_in, 24, 1)
    b2 = net.conv2d(net.conv2d(net.conv2d(x, c_in, c7, 1), c7, c7, (1, 7)), c7, 24, (7, 1))
    b3 = net.conv2d(x, c_in, c7, 1)
    for k, c_out in (((7, 1), c7), ((1, 7), c7), ((7, 1), c7), ((1, 7), 24)):
        b3 = net.conv2d(b3, c7, c_out, k)
    b4 = net.conv2d(net.pool(x, "AveragePool", 3, 1), c_in, 24, 1)
    return net.op("Concat", [b1, b2, b3, b4], axis=1), 96


def inception_v3(size: int = 75):
    """Inception-v3's stem and its A, B (grid reduction) and C (factorised 7x7) modules."""
    net = Net(6)
    t = net.conv2d("x", 3, 4, 3, 2)
    t = net.conv2d(t, 4, 4, 3)
    t = net.conv2d(t, 4, 8, 3)
    t = net.pool(t, "MaxPool", 3, 2)
    t = net.conv2d(t, 8, 10, 1)
    t = net.conv2d(t, 10, 24, 3)
    c = 24
    for pool_c in (4, 8):
        t, c = _inception_a(net, t, c, pool_c)
    t, c = _inception_b(net, t, c)
    for c7 in (16, 20):
        t, c = _inception_c(net, t, c, c7)
    t = net.op("GlobalAveragePool", [t])
    return net.finish("inception_v3", {"x": [1, 3, size, size]}, t, [1, c, 1, 1])


def vgg_19():
    return vgg19(width=16, size=64, classes=100)


GRAPHS = {"bert": bert, "nasrnn": nasrnn, "resnext50": resnext50, "nasnet_a": nasnet_a,
          "squeezenet": squeezenet, "vgg19": vgg_19, "inception_v3": inception_v3}


def build(name: str):
    """The ONNX model of one graph, checked by onnx and its shapes inferred."""
    import onnx

    model = onnx.shape_inference.infer_shapes(GRAPHS[name]())
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv=None) -> None:
    import onnx

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", nargs="*", choices=sorted(GRAPHS))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or GRAPHS:
        model = build(name)
        onnx.save(model, str(args.out / f"{name}.onnx"))
        print(f"{name}: {len(model.graph.node)} nodes -> {args.out / (name + '.onnx')}")


if __name__ == "__main__":
    main()
