"""Named axes for an ONNX model's positional dimensions, found by unification through its ops.

Every dimension of every value is a slot. The ops say which slots are one axis: a MatMul's
contracted dimension in both operands, an elementwise op's aligned dimensions (numpy's trailing
alignment) and its output's, a Conv's batch and channels, a BatchNormalization's channel and its
per-channel parameters, a Transpose's permuted dimensions, and so on (`UNIFY`). Slots are merged
with union-find, except that two dimensions of one tensor are never merged (a tensor's axes have
distinct names): the importer renames where such a merge was refused.

Each class of slots is then named, in this order of preference: the name given by the caller
(`axis_names={"x": ["N", "C", "H", "W"]}`), the `dim_param` of a symbolic dimension, the
flattening of the axes a Reshape or Flatten merged into it, a role the ops give it (`N` for the
batch of a Conv, pooling or batchnorm input, `C` for its channels, `D`/`H`/`W` for spatial
dimensions), and otherwise `<value>.<position>` of the first value it appears in. A name taken by
another class gets a suffix (`C_1`). The naming is deterministic: it follows the graph's order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ngrules.interop import OnnxError, UnsupportedOp
from ngrules.ir.axes import Axis, FlattenedAxis

Slot = tuple[str, int]


class Shapes:
    """The static shape of every value, with the `dim_param` of each symbolic dimension."""

    def __init__(self, model, lengths: Mapping[str, int]):
        from onnx import shape_inference

        try:
            model = shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
        except Exception as e:  # onnx raises its own checker/inference errors
            raise OnnxError(f"ONNX shape inference failed: {e}") from None
        self.model = model
        self.shape: dict[str, tuple[int | None, ...]] = {}
        self.params: dict[str, tuple[str | None, ...]] = {}
        self.elem: dict[str, int] = {}
        graph = model.graph
        for init in graph.initializer:
            self.shape[init.name] = tuple(init.dims)
            self.params[init.name] = (None,) * len(init.dims)
            self.elem[init.name] = init.data_type
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            if vi.name in self.shape or not vi.type.HasField("tensor_type"):
                continue
            tt = vi.type.tensor_type
            self.elem[vi.name] = tt.elem_type
            if not tt.HasField("shape"):
                continue
            dims = [self._length(vi.name, d, lengths) for d in tt.shape.dim]
            self.shape[vi.name] = tuple(length for length, _ in dims)
            self.params[vi.name] = tuple(param for _, param in dims)

    @staticmethod
    def _length(value: str, dim, lengths: Mapping[str, int]) -> tuple[int | None, str | None]:
        if dim.HasField("dim_value"):
            return dim.dim_value, None
        param = dim.dim_param if dim.HasField("dim_param") else None
        if param is not None and param in lengths:
            return int(lengths[param]), param
        return None, param

    def of(self, value: str, node_name: str = "") -> tuple[int, ...]:
        """The shape of a value; an error naming it when inference could not fix it."""
        shape = self.shape.get(value)
        if shape is not None and 0 in shape:
            raise UnsupportedOp(f"{value!r} has a dimension of length 0 {shape}")
        if shape is None or any(d is None or d < 1 for d in shape):
            params = [p for p in self.params.get(value, ()) if p]
            hint = (
                f"; give the length of {params[0]!r} (--length {params[0]}=N, or "
                f"lengths={{{params[0]!r}: N}})"
                if params
                else ""
            )
            where = f" (node {node_name})" if node_name else ""
            raise OnnxError(f"the shape of {value!r}{where} is not static: {shape}{hint}")
        return shape  # type: ignore[return-value]

    def known(self, value: str) -> bool:
        shape = self.shape.get(value)
        return shape is not None and all(d is not None and d >= 1 for d in shape)


class Naming:
    """Union-find over dimension slots; `axes(value)` gives the named axes of a value."""

    def __init__(self, shapes: Shapes, axis_names: Mapping[str, Sequence[str | None]]):
        self.shapes = shapes
        self._parent: dict[Slot, Slot] = {}
        self._values: dict[Slot, set[str]] = {}
        self._order: list[Slot] = []
        self._seq: dict[Slot, int] = {}
        self._named: dict[Slot, str] = {}  # class root -> chosen name (caller's or dim_param)
        self._hint: dict[Slot, str] = {}
        self._recipe: dict[Slot, list[Slot]] = {}
        self._axis: dict[Slot, Axis] = {}
        self._overrides = axis_names

    # -- union-find ---------------------------------------------------------------------------
    def slots(self, value: str) -> list[Slot]:
        if not self.shapes.known(value):
            return []
        slots = [(value, i) for i in range(len(self.shapes.shape[value]))]
        if slots and slots[0] not in self._parent:
            given = self._overrides.get(value, ())
            for i, slot in enumerate(slots):
                self._parent[slot] = slot
                self._values[slot] = {value}
                self._seq[slot] = len(self._order)
                self._order.append(slot)
                param = given[i] if i < len(given) else None
                param = param or self.shapes.params.get(value, ())[i]
                if param:
                    self._named.setdefault(slot, param)
        return slots

    def length(self, slot: Slot) -> int:
        return self.shapes.shape[slot[0]][slot[1]]

    def find(self, slot: Slot) -> Slot:
        root = slot
        while self._parent[root] != root:
            root = self._parent[root]
        while self._parent[slot] != root:
            self._parent[slot], slot = root, self._parent[slot]
        return root

    def unify(self, a: Slot, b: Slot) -> None:
        """One axis for both slots, unless their lengths differ or their tensors would clash."""
        if a not in self._parent or b not in self._parent or self.length(a) != self.length(b):
            return
        ra, rb = self.find(a), self.find(b)
        if ra == rb or self._values[ra] & self._values[rb]:
            return
        if self._seq[rb] < self._seq[ra]:
            ra, rb = rb, ra
        self._parent[rb] = ra
        self._values[ra] |= self._values.pop(rb)
        for table in (self._named, self._hint, self._recipe):
            if rb in table:
                table.setdefault(ra, table.pop(rb))

    def hint(self, slot: Slot, name: str) -> None:
        if slot in self._parent:
            self._hint.setdefault(self.find(slot), name)

    def flattened(self, out: Slot, parts: list[Slot]) -> None:
        """`out` is the flattening of `parts` (a Reshape or Flatten merged them)."""
        if out in self._parent and len(parts) > 1:
            self._recipe.setdefault(self.find(out), parts)

    # -- naming -------------------------------------------------------------------------------
    def resolve(self) -> None:
        """Name every class, in the order of the slots' first appearance."""
        taken: set[str] = set()
        self._flats: set[str] = set()
        for slot in self._order:
            self._resolve(self.find(slot), taken)

    def _resolve(self, root: Slot, taken: set[str]) -> Axis:
        if root in self._axis:
            return self._axis[root]
        length = self.length(root)
        axis = None
        if root not in self._named and root in self._recipe:
            parts = [self._resolve(self.find(p), taken) for p in self._recipe[root]]
            if len({p.name for p in parts}) == len(parts):
                flat = FlattenedAxis(parts)
                free = flat.name not in taken or flat.name in self._flats
                if free and flat.length == length:  # one flattening of the same axes: one axis
                    axis = flat
                    self._flats.add(flat.name)
        if axis is None:
            base = self._named.get(root) or self._hint.get(root) or f"{root[0]}.{root[1]}"
            name, k = base, 0
            while name in taken:
                k += 1
                name = f"{base}_{k}"
            axis = Axis(name, length)
        taken.add(axis.name)
        self._axis[root] = axis
        return axis

    def axes(self, value: str) -> tuple[Axis, ...]:
        """The named axes of a value, in ONNX's positional order."""
        return tuple(self._axis[self.find(s)] for s in self.slots(value))


# -- what each op says about its slots ----------------------------------------------------------
def _same(n: Naming, a: str, b: str) -> None:
    """Positional: equal-length dimensions of two values of the same rank are one axis."""
    sa, sb = n.slots(a), n.slots(b)
    if len(sa) == len(sb):
        for x, y in zip(sa, sb):
            n.unify(x, y)


def _trailing(n: Naming, a: str, out: str) -> None:
    """numpy broadcasting: a's dimensions align with out's trailing ones."""
    sa, so = n.slots(a), n.slots(out)
    for x, y in zip(reversed(sa), reversed(so)):
        n.unify(x, y)


def _broadcast(n: Naming, node, consts) -> None:
    for out in node.output[:1]:
        for name in node.input:
            if name:
                _trailing(n, name, out)


def _matmul(n: Naming, node, consts) -> None:
    a, b, out = (n.slots(v) for v in (node.input[0], node.input[1], node.output[0]))
    if not a or not b or not out:
        return
    n.unify(a[-1], b[-2] if len(b) > 1 else b[-1])
    if len(a) > 1:
        n.unify(a[-2], out[-2 if len(b) > 1 else -1])
    if len(b) > 1:
        n.unify(b[-1], out[-1])
    for x, y in zip(reversed(a[:-2]), reversed(out[: len(out) - 2])):
        n.unify(x, y)
    for x, y in zip(reversed(b[:-2]), reversed(out[: len(out) - 2])):
        n.unify(x, y)


def _gemm(n: Naming, node, consts) -> None:
    attrs = {a.name: a.i for a in node.attribute}
    a, b, out = (n.slots(v) for v in (node.input[0], node.input[1], node.output[0]))
    if len(a) != 2 or len(b) != 2 or len(out) != 2:
        return
    a = a[::-1] if attrs.get("transA") else a
    b = b[::-1] if attrs.get("transB") else b
    n.unify(a[1], b[0])
    n.unify(a[0], out[0])
    n.unify(b[1], out[1])
    if len(node.input) > 2 and node.input[2]:
        _trailing(n, node.input[2], node.output[0])


def _spatial_hints(n: Naming, slots: list[Slot]) -> None:
    names = {1: "W", 2: "HW", 3: "DHW"}.get(len(slots) - 2, "")
    for slot, name in zip(slots[2:], names):
        n.hint(slot, name)
    if slots:
        n.hint(slots[0], "N")
        n.hint(slots[1], "C")


def _conv(n: Naming, node, consts) -> None:
    x, w, y = (n.slots(v) for v in (node.input[0], node.input[1], node.output[0]))
    if not x or not y:
        return
    n.unify(x[0], y[0])
    group = next((a.i for a in node.attribute if a.name == "group"), 1)
    if w and group == 1:
        n.unify(x[1], w[1])
    if w:
        n.unify(w[0], y[1])
    if len(node.input) > 2 and node.input[2]:
        bias = n.slots(node.input[2])
        if bias:
            n.unify(bias[0], y[1])
    _spatial_hints(n, x)
    _spatial_hints(n, y)


def _pool(n: Naming, node, consts) -> None:
    x, y = n.slots(node.input[0]), n.slots(node.output[0])
    if x and y:
        n.unify(x[0], y[0])
        n.unify(x[1], y[1])
        _spatial_hints(n, x)
        _spatial_hints(n, y)


def _batchnorm(n: Naming, node, consts) -> None:
    x = n.slots(node.input[0])
    if not x:
        return
    _same(n, node.input[0], node.output[0])
    channel = x[1] if len(x) > 1 else x[0]
    for name in list(node.input[1:]) + list(node.output[1:]):
        slots = n.slots(name) if name else []
        if slots:
            n.unify(slots[0], channel)
    if len(x) > 1:
        n.hint(x[0], "N")
        n.hint(x[1], "C")


def _layernorm(n: Naming, node, consts) -> None:
    _same(n, node.input[0], node.output[0])
    for name in node.input[1:]:
        if name:
            _trailing(n, name, node.input[0])


def _transpose(n: Naming, node, consts) -> None:
    x, y = n.slots(node.input[0]), n.slots(node.output[0])
    perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
    perm = perm if perm else list(range(len(x)))[::-1]
    if len(perm) == len(y) == len(x):
        for i, p in enumerate(perm):
            n.unify(y[i], x[p])


def _reduce_axes(node, consts, rank: int) -> list[int] | None:
    axes = next((list(a.ints) for a in node.attribute if a.name == "axes"), None)
    if axes is None and len(node.input) > 1 and node.input[1]:
        const = consts.get(node.input[1])
        axes = None if const is None else [int(v) for v in np.ravel(const)]
    if axes is None:
        return None
    return sorted(a % rank for a in axes) if rank else []


def _reduce(n: Naming, node, consts) -> None:
    x, y = n.slots(node.input[0]), n.slots(node.output[0])
    if len(x) == len(y):
        _same(n, node.input[0], node.output[0])
        return
    red = _reduce_axes(node, consts, len(x))
    if node.op_type in ("ArgMax", "ArgMin"):
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        red = [axis % len(x)] if x else []
    kept = [s for i, s in enumerate(x) if red is not None and i not in red]
    if len(kept) == len(y):
        for a, b in zip(kept, y):
            n.unify(a, b)


def _squeeze(n: Naming, node, consts) -> None:
    """Squeeze and Unsqueeze: the dimensions longer than 1 keep their order."""
    x, y = n.slots(node.input[0]), n.slots(node.output[0])
    big_x = [s for s in x if n.length(s) > 1]
    big_y = [s for s in y if n.length(s) > 1]
    if len(big_x) == len(big_y):
        for a, b in zip(big_x, big_y):
            n.unify(a, b)


def reshape_groups(src: Sequence[int], dst: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """Runs (i0, i1, j0, j1) with prod(src[i0:i1]) == prod(dst[j0:j1]), finest first."""
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        i0, j0 = i, j
        a = src[i] if i < len(src) else 1
        b = dst[j] if j < len(dst) else 1
        i, j = min(i + 1, len(src)), min(j + 1, len(dst))
        while a != b:
            if a < b and i < len(src):
                a, i = a * src[i], i + 1
            elif j < len(dst):
                b, j = b * dst[j], j + 1
            else:
                break
        groups.append((i0, i, j0, j))
    return groups


def _reshape(n: Naming, node, consts) -> None:
    x, y = n.slots(node.input[0]), n.slots(node.output[0])
    if not x or not y:
        return
    shapes = [n.length(s) for s in x], [n.length(s) for s in y]
    for i0, i1, j0, j1 in reshape_groups(*shapes):
        if i1 - i0 == 1 and j1 - j0 == 1:
            n.unify(x[i0], y[j0])
        elif j1 - j0 == 1:
            n.flattened(y[j0], x[i0:i1])
        elif i1 - i0 == 1:
            n.flattened(x[i0], y[j0:j1])


def _concat(n: Naming, node, consts) -> None:
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    out = n.slots(node.output[0])
    for name in node.input:
        slots = n.slots(name)
        for i, (a, b) in enumerate(zip(slots, out)):
            if i != axis % max(len(out), 1):
                n.unify(a, b)


def _split(n: Naming, node, consts) -> None:
    for out in node.output:
        if out:
            _same(n, node.input[0], out)


def _first(n: Naming, node, consts) -> None:
    for out in node.output:
        if out and node.input and node.input[0]:
            _same(n, node.input[0], out)


UNIFY: dict[str, Callable] = {
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Conv": _conv,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "GlobalAveragePool": _pool,
    "GlobalMaxPool": _pool,
    "BatchNormalization": _batchnorm,
    "LayerNormalization": _layernorm,
    "Transpose": _transpose,
    "Squeeze": _squeeze,
    "Unsqueeze": _squeeze,
    "Reshape": _reshape,
    "Flatten": _reshape,
    "Concat": _concat,
    "Split": _split,
    **dict.fromkeys(
        ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2",
         "ReduceSumSquare", "ReduceLogSumExp", "ArgMax", "ArgMin"),
        _reduce,
    ),
    **dict.fromkeys(
        ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where", "Equal",
         "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "PRelu", "And", "Or", "Xor"),
        _broadcast,
    ),
}


def name_axes(shapes: Shapes, consts: Mapping[str, np.ndarray],
              axis_names: Mapping[str, Sequence[str | None]]) -> Naming:
    """Unify the slots of every value of the model through its ops, then name the classes."""
    naming = Naming(shapes, axis_names)
    graph = shapes.model.graph
    for vi in graph.input:
        naming.slots(vi.name)
    for init in graph.initializer:
        naming.slots(init.name)
    for node in graph.node:
        for name in list(node.input) + list(node.output):
            if name:
                naming.slots(name)
        UNIFY.get(node.op_type, _first)(naming, node, consts)
    naming.resolve()
    return naming
