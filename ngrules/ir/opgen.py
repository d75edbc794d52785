"""Generators of random valid instances of each built-in op, for property tests.

Each generator is `gen(draw, leaf) -> Node`: `draw` is hypothesis's, `leaf(axes)` makes an
input of the test's dtype. Axes come from one small pool per instance so that a name always has
one length. hypothesis is imported only when a generator runs.
"""

from __future__ import annotations

from ngrules.ir.axes import Axes, Axis, flatten_groups, make_axis
from ngrules.ir.graph import make_node

POOL_NAMES = ("A", "B", "C", "D", "E", "F")


def _st():
    from hypothesis import strategies

    return strategies


def axis_pool(draw, size: int = len(POOL_NAMES)) -> tuple[Axis, ...]:
    """Up to `size` axes with distinct names and lengths 1-5."""
    st = _st()
    lengths = draw(st.lists(st.integers(1, 5), min_size=size, max_size=size))
    return tuple(Axis(n, n_len) for n, n_len in zip(POOL_NAMES, lengths))


def some_axes(draw, pool, min_size: int = 0, max_size: int = 3) -> Axes:
    """A random ordered selection of distinct axes from the pool."""
    st = _st()
    picked = draw(st.permutations(pool))
    n = draw(st.integers(min_size, min(max_size, len(pool))))
    return Axes(picked[:n])


def gen_placeholder(draw, leaf):
    return leaf(some_axes(draw, axis_pool(draw)))


def gen_variable(draw, leaf):
    x = leaf(some_axes(draw, axis_pool(draw)))
    return make_node("Variable", name="v", axes=x.axes, dtype=x.dtype, initial=0.5)


def gen_constant(draw, leaf):
    import numpy as np

    x = leaf(some_axes(draw, axis_pool(draw)))
    value = np.linspace(0.5, 1.5, x.axes.size, dtype=x.dtype).reshape(x.axes.lengths)
    return make_node("Constant", value=value, axes=x.axes)


def gen_elementwise(op: str):
    from ngrules.ir.ops import OPS

    def gen(draw, leaf):
        axes = some_axes(draw, axis_pool(draw))
        arity = OPS[op].arity
        return make_node(op, tuple(leaf(axes) for _ in range(arity)))

    return gen


def gen_select(draw, leaf):
    """Select on a comparison of two more inputs (so the condition is a bool tensor)."""
    axes = some_axes(draw, axis_pool(draw))
    cond = make_node("Greater", (leaf(axes), leaf(axes)))
    return make_node("Select", (cond, leaf(axes), leaf(axes)))


def gen_cast(draw, leaf):
    import numpy as np

    x = leaf(some_axes(draw, axis_pool(draw)))
    dtypes = (np.float64, np.float32, np.float16, np.int32, np.int64, np.bool_)
    return make_node("Cast", (x,), dtype=draw(_st().sampled_from(dtypes)))


def gen_one_hot(draw, leaf):
    """OneHot of the argmax of an input (so indices are integers within the class axis)."""
    import numpy as np

    pool = axis_pool(draw)
    axes = some_axes(draw, pool[1:], min_size=1)
    x = leaf(axes)
    indices = make_node("Argmax", (x,), reduction_axes=axes[:1], dtype=np.int32)
    classes = Axis("K", axes[0].length + draw(_st().integers(0, 2)))
    return make_node("OneHot", (indices,), axis=classes, dtype=x.dtype)


def gen_axis_index(draw, leaf):
    """The positions along one axis of an input."""
    axes = some_axes(draw, axis_pool(draw), min_size=1)
    x = leaf(axes)
    return make_node("AxisIndex", (x,), axis=axes[draw(_st().integers(0, len(axes) - 1))])


def gen_sloped(op: str):
    """A fused relu op (forward or backward) on operands of one axes, with a random slope."""
    from ngrules.ir.ops import OPS

    def gen(draw, leaf):
        axes = some_axes(draw, axis_pool(draw))
        slope = draw(_st().sampled_from((0.0, 0.01, 0.2, 1.5)))
        return make_node(op, tuple(leaf(axes) for _ in range(OPS[op].arity)), slope=slope)

    return gen


def gen_reduction(op: str):
    def gen(draw, leaf):
        st = _st()
        axes = some_axes(draw, axis_pool(draw), min_size=1)
        red = Axes(a for a in axes if draw(st.booleans()))
        return make_node(op, (leaf(axes),), reduction_axes=red or axes[:1])

    return gen


def gen_softmax(draw, leaf):
    st = _st()
    axes = some_axes(draw, axis_pool(draw), min_size=1)
    norm = Axes(a for a in axes if draw(st.booleans()))
    return make_node("Softmax", (leaf(axes),), normalization_axes=norm or axes[-1:])


def gen_dot(draw, leaf):
    pool = axis_pool(draw)
    return make_node("Dot", (leaf(some_axes(draw, pool)), leaf(some_axes(draw, pool))))


def gen_dot_low(draw, leaf):
    st = _st()
    pool = axis_pool(draw, 4)
    i, k, j = pool[0], pool[1], pool[2]
    rx, ry = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    x_axes = Axes((i, k)) if rx == 2 else Axes((k,))
    y_axes = Axes((Axis("K2", k.length), j)) if ry == 2 else Axes((Axis("K2", k.length),))
    out = Axes(((i,) if rx == 2 else ()) + ((j,) if ry == 2 else ()))
    return make_node("DotLowDimension", (leaf(x_axes), leaf(y_axes)), axes=out)


def gen_broadcast(draw, leaf):
    pool = axis_pool(draw)
    out = some_axes(draw, pool, max_size=4)
    keep = draw(_st().lists(_st().booleans(), min_size=len(out), max_size=len(out)))
    x_axes = Axes(a for a, k in zip(out, keep) if k)
    x_axes = Axes(draw(_st().permutations(list(x_axes))))
    return make_node("Broadcast", (leaf(x_axes),), axes=out)


def gen_reorder(draw, leaf):
    axes = some_axes(draw, axis_pool(draw), max_size=4)
    return make_node("ReorderAxes", (leaf(axes),), axes=Axes(draw(_st().permutations(list(axes)))))


def _groups(draw, n: int) -> list[int]:
    """Random sizes of consecutive groups covering n items."""
    st, sizes, left = _st(), [], n
    while left:
        size = draw(st.integers(1, left))
        sizes.append(size)
        left -= size
    return sizes


def gen_flatten(draw, leaf):
    axes = some_axes(draw, axis_pool(draw), min_size=1, max_size=4)
    return make_node("Flatten", (leaf(axes),), axes=flatten_groups(axes, _groups(draw, len(axes))))


def gen_unflatten(draw, leaf):
    axes = some_axes(draw, axis_pool(draw), min_size=1, max_size=4)
    flat = flatten_groups(axes, _groups(draw, len(axes)))
    return make_node("Unflatten", (leaf(flat),), axes=axes)


def gen_concat(draw, leaf):
    st = _st()
    rest = some_axes(draw, axis_pool(draw), max_size=2)
    pos = draw(st.integers(0, len(rest)))
    lengths = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    parts = [leaf(rest[:pos] + Axes((make_axis(n),)) + rest[pos:]) for n in lengths]
    return make_node("Concat", tuple(parts), axis=make_axis(sum(lengths)), position=pos)


def gen_slice(draw, leaf):
    st = _st()
    axes = some_axes(draw, axis_pool(draw), min_size=1)
    pos = draw(st.integers(0, len(axes) - 1))
    length = axes[pos].length
    start = draw(st.integers(0, length - 1))
    stop = draw(st.integers(start + 1, length))
    return make_node(
        "Slice", (leaf(axes),), position=pos, start=start, stop=stop, axis=make_axis(stop - start)
    )


def _slice_spec(draw, full: Axes):
    """A random (start, stop, step) row per axis (step 0: an index), and the sliced axes."""
    import numpy as np

    st, rows, out = _st(), [], []
    for ax in full:
        start = draw(st.integers(0, ax.length - 1))
        if draw(st.integers(0, 3)) == 0:
            rows.append((start, start + 1, 0))
            continue
        stop, step = draw(st.integers(start + 1, ax.length)), draw(st.integers(1, 2))
        rows.append((start, stop, step))
        out.append(Axis(ax.name, len(range(start, stop, step))))
    return np.array(rows, dtype=np.int64).reshape(len(full), 3), Axes(out)


def gen_tensor_slice(draw, leaf):
    full = some_axes(draw, axis_pool(draw), min_size=1)
    spec, out = _slice_spec(draw, full)
    return make_node("TensorSlice", (leaf(full),), slices=spec, axes=out)


def gen_unslice(draw, leaf):
    full = some_axes(draw, axis_pool(draw), min_size=1)
    spec, part = _slice_spec(draw, full)
    return make_node("Unslice", (leaf(part),), slices=spec, axes=full)


def gen_pad(draw, leaf):
    import numpy as np

    st = _st()
    axes = some_axes(draw, axis_pool(draw), min_size=1)
    pads = [(draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in axes]
    out = Axes(Axis(a.name, a.length + lo + hi) for a, (lo, hi) in zip(axes, pads))
    return make_node("Pad", (leaf(axes),), paddings=np.array(pads, np.int64), axes=out)


def gen_expand_dims(draw, leaf):
    pool = axis_pool(draw)
    axes = some_axes(draw, pool[1:])
    pos = draw(_st().integers(0, len(axes)))
    return make_node("ExpandDims", (leaf(axes),), axis=pool[0], position=pos)


def gen_axes_cast(draw, leaf):
    axes = some_axes(draw, axis_pool(draw), min_size=1)
    renamed = Axes(Axis(f"{a.name}2", a.length) for a in axes)
    return make_node("AxesCast", (leaf(axes),), axes=renamed)


def window_geometry(draw, dilate: bool = True):
    """Small random (input, window, output) lengths and attrs of a convolution or pooling."""
    import numpy as np

    st = _st()
    spatial = [draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 4))]
    pad, stride, dil, window, out = [], [], [], [], []
    for n in spatial:
        p, s = draw(st.integers(0, 1)), draw(st.integers(1, 2))
        k, d = draw(st.integers(1, 3)), draw(st.integers(1, 2)) if dilate else 1
        if d * (k - 1) + 1 > n + 2 * p:
            k, d = min(k, n + 2 * p), 1
        p = p if dilate else min(p, k - 1)  # pooling: no window entirely in padding
        pad, stride, dil, window = pad + [p], stride + [s], dil + [d], window + [k]
        out.append((n + 2 * p - (d * (k - 1) + 1)) // s + 1)
    attrs = {"padding": np.array(pad), "strides": np.array(stride)}
    if dilate:
        attrs["dilation"] = np.array(dil)
    return spatial, window, out, attrs


def _named(names, lengths) -> Axes:
    return Axes(Axis(n, k) for n, k in zip(names, lengths))


def gen_convolution(op: str):
    """Convolution, or one of its two gradients, on ngraph's named layouts."""

    def gen(draw, leaf):
        st = _st()
        c, n, k = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
        groups = draw(st.sampled_from((1, 1, 2, 3)))
        spatial, window, out, attrs = window_geometry(draw)
        attrs["groups"] = groups
        x = _named("CDHWN", [c * groups, *spatial, n])
        w = _named("JTRSK" if groups > 1 else "CTRSK", [c, *window, k * groups])
        y = _named(("K", "M", "P", "Q", "N"), [k * groups, *out, n])
        args, axes = {
            "Convolution": ((x, w), y),
            "ConvBpropData": ((y, w), x),
            "ConvUpdate": ((y, x), w),
        }[op]
        return make_node(op, tuple(leaf(a) for a in args), axes=axes, **attrs)

    return gen


def gen_pooling(op: str):
    """Pooling (max or avg), or its gradient, on ngraph's named layout."""
    import numpy as np

    def gen(draw, leaf):
        st = _st()
        c, n = draw(st.integers(1, 2)), draw(st.integers(1, 2))
        spatial, window, out, attrs = window_geometry(draw, dilate=False)
        x = _named("CDHWN", [c, *spatial, n])
        y = _named(("C", "M", "P", "Q", "N"), [c, *out, n])
        attrs.update(mode=draw(st.sampled_from(["max", "avg"])), window=np.array(window))
        if op == "Pooling":
            return make_node(op, (leaf(x),), axes=y, **attrs)
        return make_node(op, (leaf(y), leaf(x)), axes=x, **attrs)

    return gen


def _bn_operands(draw, leaf):
    pool = axis_pool(draw)
    rest = some_axes(draw, pool[1:], min_size=1)
    channel = Axes((pool[0],))
    return leaf(channel + rest), channel


def gen_bn_fprop(draw, leaf):
    x, channel = _bn_operands(draw, leaf)
    eps = draw(_st().sampled_from([1e-3, 0.1]))  # eps 0 with one element per channel is 0/0
    return make_node("BatchnormFprop", (x, leaf(channel), leaf(channel)), eps=eps)


def gen_bn_bprop(draw, leaf):
    x, channel = _bn_operands(draw, leaf)
    args = (leaf(x.axes), x, leaf(channel), leaf(channel), leaf(channel))
    return make_node("BatchnormBprop", args, eps=draw(_st().sampled_from([1e-3, 0.1])))


def gen_output(draw, leaf):
    node = gen_bn_fprop(draw, leaf)
    return make_node("Output", (node,), index=draw(_st().integers(0, 2)))


def gen_gather(op: str):
    """Gather of x along one of its axes by integer indices (an Argmax, so in range), or
    ScatterAdd of a delta shaped like that Gather's result back into x's axes."""
    import numpy as np

    def gen(draw, leaf):
        st = _st()
        pool = axis_pool(draw)
        x_axes = some_axes(draw, pool[:3], min_size=1)
        axis = draw(st.sampled_from(list(x_axes)))
        index_axes = some_axes(draw, pool[3:5])
        choices = leaf(index_axes + Axes((Axis("L", axis.length + draw(st.integers(0, 1))),)))
        dtype = draw(st.sampled_from((np.int32, np.int64)))
        indices = make_node("Argmax", (choices,), reduction_axes=choices.axes[-1:], dtype=dtype)
        if draw(st.booleans()):  # negative indices count from the end
            indices = make_node("Subtract", (indices, make_node(
                "Constant", value=np.full(index_axes.lengths, axis.length, dtype),
                axes=index_axes)))
        if op == "Gather":
            return make_node("Gather", (leaf(x_axes), indices), axis=axis)
        pos = x_axes.index(axis)
        delta = leaf(x_axes[:pos] + index_axes + x_axes[pos + 1 :])
        return make_node("ScatterAdd", (delta, indices), axis=axis, axes=x_axes)

    return gen


def gen_logical(op: str):
    """A logic op on comparisons of inputs (so its operands are bool tensors)."""
    from ngrules.ir.ops import OPS

    def gen(draw, leaf):
        axes = some_axes(draw, axis_pool(draw))
        args = tuple(make_node("Greater", (leaf(axes), leaf(axes))) for _ in range(OPS[op].arity))
        return make_node(op, args)

    return gen


def gen_mod(draw, leaf):
    axes = some_axes(draw, axis_pool(draw))
    return make_node("Mod", (leaf(axes), leaf(axes)), fmod=draw(_st().integers(0, 1)))


def gen_top_k(draw, leaf):
    st = _st()
    x_axes = some_axes(draw, axis_pool(draw), min_size=1)
    axis = draw(st.sampled_from(list(x_axes)))
    k = Axis("J", draw(st.integers(1, axis.length)))
    return make_node("TopKIndices", (leaf(x_axes),), axis=axis, top=k,
                     largest=draw(st.integers(0, 1)))


def _integers(node, scale: float, dtype):
    """node * scale cast to an integer dtype (the absolute value first for unsigned ones)."""
    import numpy as np

    if np.dtype(dtype).kind == "u":
        node = make_node("Absolute", (node,))
    factor = make_node("Constant", value=np.asarray(scale, node.dtype), axes=())
    spread = make_node("Multiply", (node, make_node("Broadcast", (factor,), axes=node.axes)))
    return make_node("Cast", (spread,), dtype=dtype)


def gen_bit_shift(draw, leaf):
    """Values up to 100 shifted by -10..10 places: negative and too long shifts included."""
    import numpy as np

    st = _st()
    axes = some_axes(draw, axis_pool(draw))
    dtype = draw(st.sampled_from((np.int8, np.int32, np.int64, np.uint8, np.uint32)))
    x, y = _integers(leaf(axes), 50.0, dtype), _integers(leaf(axes), 5.0, dtype)
    return make_node("BitShift", (x, y), direction=draw(st.sampled_from(("left", "right"))))


def gen_trunc_divide(draw, leaf):
    """Integers of either sign divided (zero divisors included), or floats."""
    import numpy as np

    st = _st()
    axes = some_axes(draw, axis_pool(draw))
    x, y = leaf(axes), leaf(axes)
    dtype = draw(st.sampled_from((None, np.int8, np.int32, np.int64)))
    if dtype is not None:
        x, y = _integers(x, 20.0, dtype), _integers(y, 4.0, dtype)
    return make_node("TruncDivide", (x, y))


def gen_bit_cast(draw, leaf):
    """Floats read as (signed or unsigned) integers of their width, or integers (cast from
    the leaf first) read as floats."""
    import numpy as np

    st = _st()
    x = leaf(some_axes(draw, axis_pool(draw)))
    width = x.dtype.itemsize
    ints = {2: np.int16, 4: np.int32, 8: np.int64}[width]
    if draw(st.booleans()):
        unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
        return make_node("BitCast", (x,), dtype=draw(st.sampled_from((ints, unsigned))))
    as_ints = make_node("Cast", (x,), dtype=ints)
    return make_node("BitCast", (as_ints,), dtype=x.dtype)
