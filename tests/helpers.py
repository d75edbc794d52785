"""Shared test helpers: placeholder leaves with domain-aware values, an independent numpy
evaluator of graphs, finite differences, and small hypothesis strategies."""

from __future__ import annotations

import itertools
import string

import numpy as np
from hypothesis import strategies as st
from recurrent_reference import recurrent_reference

import ngrules as ng
from ngrules.ir.graph import toposort
from ngrules.verification.instances import domain_values, placeholder_domains

FLOAT_DTYPES = (np.float32, np.float64)
_names = itertools.count()

# -- leaves and their values -------------------------------------------------------------------


class Leaves:
    """`leaf(axes)` for op generators: a fresh placeholder of one dtype, remembered in order."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.made: list[ng.Node] = []

    def __call__(self, axes) -> ng.Node:
        node = ng.placeholder(axes, self.dtype, name=f"p{next(_names)}")
        self.made.append(node)
        return node


def random_feeds(outputs, seed: int) -> dict[ng.Node, np.ndarray]:
    """A value for every placeholder under `outputs`, drawn from its domain."""
    rng = np.random.default_rng(seed)
    return {
        node: domain_values(rng, node.axes.lengths, node.dtype, domain)
        for node, domain in placeholder_domains(outputs).items()
    }


def single_outputs(node: ng.Node) -> list[ng.Node]:
    """The node itself, or the `Output` nodes of a multi-output node."""
    return list(ng.outputs_of(node)) if node.outputs is not None else [node]


def draw_op_instance(data, op: str, dtype):
    """A random instance of `op` from its generator, its single outputs and random feeds."""
    node = ng.OPS[op].gen(data.draw, Leaves(dtype))
    outputs = single_outputs(node)
    feeds = random_feeds(outputs, data.draw(st.integers(0, 2**32 - 1), label="seed"))
    return node, outputs, feeds


def tolerance(dtype) -> dict:
    return (
        {"rtol": 2e-4, "atol": 2e-4}
        if np.dtype(dtype) == np.float32
        else {"rtol": 1e-9, "atol": 1e-9}
    )


# -- an independent numpy evaluator ------------------------------------------------------------
def _letters(*axes_lists) -> dict[str, str]:
    names = dict.fromkeys(a.name for axes in axes_lists for a in axes)
    return dict(zip(names, string.ascii_letters))


def einsum_dot(x, y, xa, ya):
    """Dot by np.einsum: contract the names both share, output x's rest then y's rest."""
    letters = _letters(xa, ya)
    shared = set(xa.names) & set(ya.names)
    out = [n for n in xa.names if n not in shared] + [n for n in ya.names if n not in shared]
    spec = "{},{}->{}".format(
        "".join(letters[n] for n in xa.names),
        "".join(letters[n] for n in ya.names),
        "".join(letters[n] for n in out),
    )
    return np.einsum(spec, x, y)


def permute(x, src, dst):
    """x laid out in axes `src`, permuted into the order of `dst` (same names), by einsum."""
    letters = _letters(src)
    spec = "".join(letters[n] for n in src.names) + "->" + "".join(letters[n] for n in dst.names)
    return np.einsum(spec, x)


def reduce_named(fn, x, axes, red):
    """fn over the axes named in `red`: move them last, merge them, reduce the merged axis."""
    keep = axes - red
    moved = permute(x, axes, keep + (axes & red))
    return fn(moved.reshape(keep.lengths + (-1,)), axis=-1)


def broadcast_named(x, axes, out):
    """x (axes) repeated along the new axes of `out`, in out's order."""
    present = out & axes
    x = permute(x, axes, present)
    shape = [a.length if a in axes else 1 for a in out]
    return np.zeros(out.lengths, x.dtype) + x.reshape(shape)


def bn_reference(x, gamma, beta, eps):
    """Batchnorm over every axis but the first: (y, mean, var) by reference §4's formulas."""
    rest = tuple(range(1, x.ndim))
    col = (-1,) + (1,) * len(rest)
    mean, var = x.mean(axis=rest), x.var(axis=rest)
    xhat = (x - mean.reshape(col)) / np.sqrt(var.reshape(col) + eps)
    return gamma.reshape(col) * xhat + beta.reshape(col), mean, var


def bn_bprop_reference(delta, x, gamma, mean, var, eps):
    rest = tuple(range(1, x.ndim))
    col, m = (-1,) + (1,) * len(rest), x.size // x.shape[0]
    xhat = (x - mean.reshape(col)) / np.sqrt(var.reshape(col) + eps)
    dgamma, dbeta = (delta * xhat).sum(axis=rest), delta.sum(axis=rest)
    scale = gamma.reshape(col) / np.sqrt(var.reshape(col) + eps)
    return scale * (delta - (xhat * dgamma.reshape(col) + dbeta.reshape(col)) / m), dgamma, dbeta


def _slice(n, x):
    a = n.attrs
    return np.take(x, np.arange(a["start"], a["stop"]), axis=a["position"])


_UNARY = {
    "Negative": np.negative,
    "Reciprocal": lambda x: 1.0 / x,
    "Sqrt": np.sqrt,
    "Square": lambda x: x * x,
    "Exp": np.exp,
    "Log": np.log,
    "Tanh": np.tanh,
    "Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "Erf": lambda x: erf_reference(x),
    "Absolute": lambda x: np.where(x < 0, -x, x),
    "Sign": lambda x: (x > 0) * 1.0 - (x < 0) * 1.0,
    "Sin": lambda x: np.imag(np.exp(1j * x)),
    "Cos": lambda x: np.real(np.exp(1j * x)),
    "Atan": lambda x: np.angle(1.0 + 1j * x),
    "Floor": lambda x: x - np.mod(x, 1.0),
    "Ceil": lambda x: -(-x - np.mod(-x, 1.0)),
    "Round": lambda x: np.array([float(round(v)) for v in np.ravel(x)]).reshape(np.shape(x)),
    "IsNaN": lambda x: x != x,
    "IsInf": lambda x: np.abs(x) == np.inf,
    "Not": lambda x: np.logical_not(x),
}
_BINARY = {
    "Add": np.add,
    "Subtract": np.subtract,
    "Multiply": np.multiply,
    "Divide": np.divide,
    "Maximum": np.maximum,
    "Minimum": np.minimum,
    "Power": lambda a, b: np.exp(b * np.log(a)),
    "Equal": lambda a, b: a == b,
    "NotEqual": lambda a, b: a != b,
    "Greater": lambda a, b: a > b,
    "Less": lambda a, b: a < b,
    "GreaterEqual": lambda a, b: ~(a < b),
    "LessEqual": lambda a, b: ~(a > b),
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.not_equal,
}
_REDUCE = {
    "Sum": np.sum,
    "Max": np.max,
    "Min": np.min,
    "Prod": np.prod,
    "Argmax": np.argmax,
    "Argmin": np.argmin,
}


def erf_reference(x):
    """2/sqrt(pi) times the integral of exp(-t^2) over [0, x], by 40-point Gauss-Legendre."""
    nodes, weights = np.polynomial.legendre.leggauss(40)
    x = np.asarray(x, np.float64)
    t = x[..., None] * (nodes + 1) / 2  # the nodes mapped onto [0, x]
    return (x / 2) * (np.exp(-(t**2)) @ weights) * 2 / np.sqrt(np.pi)


def softmax_reference(x, axes, norm):
    """exp(x) / sum(exp(x)) over the named axes, by moving them last and merging them."""
    keep = axes - norm
    moved = permute(x, axes, keep + (axes & norm))
    flat = moved.reshape(keep.lengths + (-1,))
    e = np.exp(flat - flat.max(axis=-1, keepdims=True))
    out = (e / e.sum(axis=-1, keepdims=True)).reshape(moved.shape)
    return permute(out, keep + (axes & norm), axes)


def _tensor_slice(x, spec):
    """x sliced one axis at a time with np.take (an index row drops its axis)."""
    axis = 0
    for start, stop, step in spec.tolist():
        if step == 0:
            x = np.take(x, start, axis=axis)
        else:
            x = np.take(x, np.arange(start, min(stop, x.shape[axis]), step), axis=axis)
            axis += 1
    return x


def _unslice(x, spec, shape):
    """Zeros of `shape` with x scattered to the positions the spec selects."""
    out = np.zeros(shape)
    grids = [
        [a] if c == 0 else list(range(a, min(b, n), c))
        for (a, b, c), n in zip(spec.tolist(), shape)
    ]
    for idx in itertools.product(*grids):
        sub = tuple(i for i, (_, _, c) in zip(idx, spec.tolist()) if c)
        pos = tuple(g.index(i) for i, g, (_, _, c) in zip(idx, grids, spec.tolist()) if c)
        out[idx] = x[pos] if sub or pos else x
    return out


def _pad(x, paddings):
    out = np.zeros([n + lo + hi for n, (lo, hi) in zip(x.shape, paddings.tolist())])
    out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, paddings.tolist()))] = x
    return out


def _geometry(a):
    ones = np.ones(3, int)
    return [np.asarray(a.get(k, ones)).tolist() for k in ("padding", "strides", "dilation")]


def conv_reference(x, w, a):
    """Direct cross-correlation, one output element at a time (ngraph's named layouts)."""
    pad, stride, dil = _geometry(a)
    xp = np.pad(x, [(0, 0)] + [(p, p) for p in pad] + [(0, 0)])
    c, t, r, s, k = w.shape
    size = [
        (xp.shape[i + 1] - (dil[i] * (w.shape[i + 1] - 1) + 1)) // stride[i] + 1 for i in range(3)
    ]
    out = np.zeros((k, *size, x.shape[4]))
    groups = int(a.get("groups", 1))
    for m, p, q in itertools.product(*(range(n) for n in size)):
        for dt, dr, ds in itertools.product(range(t), range(r), range(s)):
            i = (
                m * stride[0] + dt * dil[0],
                p * stride[1] + dr * dil[1],
                q * stride[2] + ds * dil[2],
            )
            for g in range(groups):  # channel group g of the input meets filters group g
                ks, cs = slice(g * k // groups, (g + 1) * k // groups), slice(g * c, (g + 1) * c)
                out[ks, m, p, q, :] += np.einsum(
                    "ck,cn->kn", w[:, dt, dr, ds, ks], xp[cs, i[0], i[1], i[2], :]
                )
    return out


def conv_adjoints(n, vals):
    """ConvBpropData and ConvUpdate as the exact gradients of <delta, conv(x, w)>, by linearity:
    the gradient of a linear map is read off its action on unit vectors."""
    d, other = vals
    attrs = n.attrs
    shape = n.axes.lengths
    out = np.zeros(shape)
    for idx in np.ndindex(*shape):
        unit = np.zeros(shape)
        unit[idx] = 1.0
        y = (
            conv_reference(unit, other, attrs)
            if n.op == "ConvBpropData"
            else conv_reference(other, unit, attrs)
        )
        out[idx] = np.sum(y * d)
    return out


def pool_reference(x, a):
    pad, stride, _ = _geometry(a)
    window = np.asarray(a["window"]).tolist()
    fill = -np.inf if a["mode"] == "max" else 0.0
    xp = np.pad(x, [(0, 0)] + [(p, p) for p in pad] + [(0, 0)], constant_values=fill)
    size = [(xp.shape[i + 1] - window[i]) // stride[i] + 1 for i in range(3)]
    out = np.zeros((x.shape[0], *size, x.shape[4]))
    for m, p, q in itertools.product(*(range(n) for n in size)):
        lo = (m * stride[0], p * stride[1], q * stride[2])
        patch = xp[
            :, lo[0] : lo[0] + window[0], lo[1] : lo[1] + window[1], lo[2] : lo[2] + window[2], :
        ]
        out[:, m, p, q, :] = (
            patch.max(axis=(1, 2, 3)) if a["mode"] == "max" else patch.mean(axis=(1, 2, 3))
        )
    return out


def bprop_pool_reference(d, x, a):
    """Delta to the first maximum of each window (in t, r, s order), or evenly over it."""
    pad, stride, _ = _geometry(a)
    window = np.asarray(a["window"]).tolist()
    fill = -np.inf if a["mode"] == "max" else 0.0
    xp = np.pad(x, [(0, 0)] + [(p, p) for p in pad] + [(0, 0)], constant_values=fill)
    grad = np.zeros(xp.shape)
    for m, p, q in itertools.product(*(range(n) for n in d.shape[1:4])):
        lo = (m * stride[0], p * stride[1], q * stride[2])
        where = (slice(None),) + tuple(slice(o, o + k) for o, k in zip(lo, window)) + (slice(None),)
        if a["mode"] == "avg":
            grad[where] += d[:, m, p, q, None, None, None, :] / np.prod(window)
            continue
        patch = xp[where].reshape(x.shape[0], -1, x.shape[4])
        first = patch.argmax(axis=1)
        for c, n in np.ndindex(first.shape):
            t, r, s = np.unravel_index(first[c, n], window)
            grad[c, lo[0] + t, lo[1] + r, lo[2] + s, n] += d[c, m, p, q, n]
    return grad[(slice(None),) + tuple(slice(p, grad.shape[i + 1] - p) for i, p in enumerate(pad))]


def _mod(x, y, fmod):
    """x - y * q, q the quotient rounded down (or toward zero with fmod)."""
    q = x / y
    q = np.trunc(q) if fmod else np.floor(q)
    return x - y * q


def _bit_shift(x, y, direction):
    """One element at a time in Python's integers, wrapped back into x's dtype."""
    bits = x.dtype.itemsize * 8
    out = []
    for a, s in zip(np.ravel(x).tolist(), np.ravel(y).tolist()):
        if not 0 <= s < bits:
            out.append(-1 if direction == "right" and a < 0 else 0)
        elif direction == "right":
            out.append(a >> s)  # Python's >> rounds down: an arithmetic shift
        else:
            wrapped = (a << s) % 2**bits
            out.append(wrapped - 2**bits if x.dtype.kind == "i" and wrapped >= 2 ** (bits - 1)
                       else wrapped)
    return np.array(out, dtype=x.dtype).reshape(np.shape(x))


def _trunc_divide(x, y):
    if x.dtype.kind == "f":
        return np.fix(x / y)
    out = [0 if b == 0 else abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
           for a, b in zip(np.ravel(x).tolist(), np.ravel(y).tolist())]
    return np.array(out).astype(x.dtype).reshape(np.shape(x))


def _clipped_index(i, n):
    i = int(i)
    return min(max(i + n if i < 0 else i, 0), n - 1)


def _gather(node, x, indices):
    """One element at a time: out[pre, idx, post] = x[pre, indices[idx], post]."""
    axis = node.attrs["axis"]
    pos, n = node.args[0].axes.index(axis), axis.length
    out = np.zeros(node.axes.lengths)
    k = np.ndim(indices)
    for where in np.ndindex(*node.axes.lengths):
        i = _clipped_index(np.asarray(indices)[where[pos : pos + k]], n)
        out[where] = x[where[:pos] + (i,) + where[pos + k :]]
    return out


def _scatter_add(node, d, indices):
    axis = node.attrs["axis"]
    pos, n = node.axes.index(axis), axis.length
    out = np.zeros(node.axes.lengths)
    k = np.ndim(indices)
    for where in np.ndindex(*np.shape(d)):
        i = _clipped_index(np.asarray(indices)[where[pos : pos + k]], n)
        out[where[:pos] + (i,) + where[pos + k :]] += d[where]
    return out


def _dynamic_window(node, vals, length):
    """(the window read, x with the update written there), the start clipped to fit."""
    x, pos = np.asarray(vals[0]), node.attrs["position"]
    length = length if length is not None else np.shape(vals[1])[pos]
    start = int(np.clip(int(vals[-1]), 0, x.shape[pos] - length))
    moved = np.moveaxis(x.copy(), pos, 0)
    window = np.moveaxis(moved[start : start + length], 0, pos)
    if len(vals) == 3:
        moved[start : start + length] = np.moveaxis(np.asarray(vals[1]), pos, 0)
    return window, np.moveaxis(moved, 0, pos)


def _top_k_indices(node, x):
    """Each row along the axis sorted by (value, position), largest first if asked."""
    a = node.attrs
    pos, k = node.args[0].axes.index(a["axis"]), a["top"].length
    rows = np.moveaxis(np.asarray(x), pos, -1)
    out = np.zeros(rows.shape[:-1] + (k,))
    for where in np.ndindex(*rows.shape[:-1]):
        row = rows[where]
        sign = -1 if a["largest"] else 1
        out[where] = sorted(range(len(row)), key=lambda i: (sign * row[i], i))[:k]
    return np.moveaxis(out, -1, pos)


_TABLE = {
    "Constant": lambda n, vals, a: a["value"],
    "Variable": lambda n, vals, a: np.full(n.axes.lengths, a["initial"]),
    "Dot": lambda n, vals, a: einsum_dot(*vals, n.args[0].axes, n.args[1].axes),
    "DotLowDimension": lambda n, vals, a: np.matmul(*vals),
    "Broadcast": lambda n, vals, a: broadcast_named(vals[0], n.args[0].axes, n.axes),
    "ReorderAxes": lambda n, vals, a: permute(vals[0], n.args[0].axes, n.axes),
    "Transpose": lambda n, vals, a: vals[0].T,
    "Flatten": lambda n, vals, a: np.reshape(vals[0], n.axes.lengths),
    "Unflatten": lambda n, vals, a: np.reshape(vals[0], n.axes.lengths),
    "Concat": lambda n, vals, a: np.concatenate(vals, axis=a["position"]),
    "Slice": lambda n, vals, a: _slice(n, vals[0]),
    "Output": lambda n, vals, a: vals[0][a["index"]],
    "Select": lambda n, vals, a: np.choose(vals[0].astype(int), [vals[2], vals[1]]),
    "Cast": lambda n, vals, a: vals[0].astype(a["dtype"]),
    "TensorSlice": lambda n, vals, a: _tensor_slice(vals[0], a["slices"]),
    "Unslice": lambda n, vals, a: _unslice(vals[0], a["slices"], n.axes.lengths),
    "Pad": lambda n, vals, a: _pad(vals[0], a["paddings"]),
    "DynamicSlice": lambda n, vals, a: _dynamic_window(n, vals, a["axis"].length)[0],
    "DynamicUpdateSlice": lambda n, vals, a: _dynamic_window(n, vals, None)[1],
    "Reverse": lambda n, vals, a: vals[0][tuple(
        slice(None, None, -1) if ax in a["reverse_axes"] else slice(None) for ax in n.axes)],
    "ExpandDims": lambda n, vals, a: np.repeat(
        np.expand_dims(vals[0], a["position"]), a["axis"].length, axis=a["position"]
    ),
    "AxesCast": lambda n, vals, a: vals[0],
    "Assign": lambda n, vals, a: vals[1],
    "Sequential": lambda n, vals, a: vals[0],
    "ValueOf": lambda n, vals, a: vals[0],
    "Convolution": lambda n, vals, a: conv_reference(*vals, a),
    "ConvBpropData": lambda n, vals, a: conv_adjoints(n, vals),
    "ConvUpdate": lambda n, vals, a: conv_adjoints(n, vals),
    "Pooling": lambda n, vals, a: pool_reference(vals[0], a),
    "BpropPool": lambda n, vals, a: bprop_pool_reference(*vals, a),
    "AxisIndex": lambda n, vals, a: np.arange(a["axis"].length, dtype=np.int64),
    "OneHot": lambda n, vals, a: np.moveaxis(np.eye(a["axis"].length)[vals[0].astype(int)], -1, 0),
    "Softmax": lambda n, vals, a: softmax_reference(vals[0], n.axes, a["normalization_axes"]),
    "BatchnormFprop": lambda n, vals, a: bn_reference(*vals, a["eps"]),
    "BatchnormBprop": lambda n, vals, a: bn_bprop_reference(*vals, a["eps"]),
    "Relu": lambda n, vals, a: np.maximum(vals[0], 0) + a["slope"] * np.minimum(0, vals[0]),
    "Mod": lambda n, vals, a: _mod(*vals, a["fmod"]),
    "BitShift": lambda n, vals, a: _bit_shift(*vals, a["direction"]),
    "TruncDivide": lambda n, vals, a: _trunc_divide(*vals),
    "BitCast": lambda n, vals, a: np.frombuffer(
        np.asarray(vals[0], n.args[0].dtype).tobytes(), a["dtype"]).reshape(n.axes.lengths),
    "TopKIndices": lambda n, vals, a: _top_k_indices(n, vals[0]),
    "Gather": lambda n, vals, a: _gather(n, *vals),
    "ScatterAdd": lambda n, vals, a: _scatter_add(n, *vals),
    "ReluBprop": lambda n, vals, a: vals[0] * ((vals[1] > 0) + a["slope"] * (vals[1] <= 0)),
    **dict.fromkeys(("LSTM", "GRU", "RNN"), lambda n, vals, a: recurrent_reference(n, vals)),
}


def _reference(n, vals):
    """The value of node n from its arguments' values, without the executor's kernels."""
    op, a = n.op, n.attrs
    if op in _UNARY:
        return _UNARY[op](vals[0])
    if op in _BINARY:
        return _BINARY[op](*vals)
    if op in _REDUCE:
        return reduce_named(_REDUCE[op], vals[0], n.args[0].axes, a["reduction_axes"])
    return _TABLE[op](n, vals, a)


#: Every op the independent numpy evaluator knows (Placeholder takes its feed).
REFERENCE_OPS = frozenset({"Placeholder", *_UNARY, *_BINARY, *_REDUCE, *_TABLE})


def numpy_eval(outputs, feeds) -> list:
    """Evaluate a graph node by node with plain numpy (feeds keyed by placeholder node)."""
    env: dict[ng.Node, object] = {}
    for node in toposort(outputs):
        if node.op == "Placeholder":
            env[node] = np.asarray(feeds[node], np.float64)
        else:
            env[node] = _reference(node, [env[arg] for arg in node.args])
    return [np.asarray(env[o]) for o in outputs]


# -- finite differences ------------------------------------------------------------------------
def central_difference(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """The gradient of the scalar f at x by float64 central differences, one entry at a time."""
    x = np.array(x, np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        saved = x[i]
        x[i] = saved + h
        up = f(x)
        x[i] = saved - h
        down = f(x)
        x[i] = saved
        grad[i] = (up - down) / (2 * h)
    return grad


def directional_difference(f, x: np.ndarray, v: np.ndarray, h: float = 1e-6) -> float:
    """d/dt f(x + t v) at t = 0 by a float64 central difference."""
    return (f(x + h * v) - f(x - h * v)) / (2 * h)


# -- hypothesis strategies for axes --------------------------------------------------------------
NAMES = tuple("ABCDEFGH")


@st.composite
def axis_lists(draw, min_size=0, max_size=5, names=NAMES):
    """A list of axes with distinct names from `names`, lengths fixed per name (1-4)."""
    chosen = draw(
        st.lists(st.sampled_from(names), unique=True, min_size=min_size, max_size=max_size)
    )
    return [ng.Axis(n, 1 + names.index(n) % 4) for n in chosen]


def axes_st(**kw):
    return axis_lists(**kw).map(ng.make_axes)


class InterruptedInDestructor:
    """Dies at once, raising a Ctrl-C where nobody can catch it (Python reports it and goes on):
    how a real Ctrl-C is lost when it lands in a destructor or a gc callback."""

    def __del__(self):
        raise KeyboardInterrupt


@st.composite
def expressions(draw, leaves, depth: int, stop_odds: int):
    """A random expression of Add, Multiply, Subtract, Negative and Exp over `leaves` (shared
    by hash-consing): a leaf at depth 0, or with chance 1 / (stop_odds + 1) at any depth."""
    if depth == 0 or draw(st.integers(0, stop_odds)) == 0:
        return draw(st.sampled_from(leaves))
    op = draw(st.sampled_from(["Add", "Multiply", "Subtract", "Negative", "Exp"]))
    arity = 1 if op in ("Negative", "Exp") else 2
    args = tuple(draw(expressions(leaves, depth - 1, stop_odds)) for _ in range(arity))
    return ng.make_node(op, args)
