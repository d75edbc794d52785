"""Named axes for an ONNX model's positional dimensions, found by unification through its ops.

Every dimension of every value is a slot. The ops say which slots are one axis: a MatMul's
contracted dimension in both operands, an elementwise op's aligned dimensions (numpy's trailing
alignment) and its output's, a Conv's batch and channels, a BatchNormalization's channel and its
per-channel parameters, a Transpose's permuted dimensions, and so on (`unify`). Slots are
merged with union-find, except that two dimensions of one tensor are never merged (a tensor's
axes have distinct names): the importer renames where such a merge was refused.

Each class of slots is then named, in this order of preference: the name given by the caller
(`axis_names={"x": ["N", "C", "H", "W"]}`), the `dim_param` of a symbolic dimension, the
flattening of the axes a Reshape or Flatten merged into it, a role the ops give it (`N` for the
batch of a Conv, pooling or batchnorm input, `C` for its channels, `D`/`H`/`W` for spatial
dimensions), and otherwise `<value>.<position>` of the first value it appears in. A name taken by
another class gets a suffix (`C_1`). The naming is deterministic: it follows the graph's order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from ngrules.errors import printable
from ngrules.interop.onnx import OnnxError, UnsupportedOp, proto
from ngrules.interop.onnx.importing import flattened
from ngrules.interop.onnx.importing.unify import unify_node
from ngrules.ir.axes import Axis, FlattenedAxis
from ngrules.ir.ops import did_you_mean
from ngrules.ir.symbolic import STAND_INS

Slot = tuple[str, int]


def _infer(model, lengths: Mapping[str, int]):
    """The model with inferred shapes, the nodes strict inference found inconsistent:
    [(op_type, node name, message)], and the lengths of `dim_param`s written in
    (`flattened`). The given lengths (and the stand-ins of symbolic
    dimensions) are put in the inputs first, so every shape computed from them is a number
    (a Reshape to [-1, 4] of a symbolic batch, which inference over `dim_param`s leaves
    unknown), unless a product of stand-ins overflows int64: then they are left out, and
    `flattened` computes what inference cannot compute without them. No data
    propagation: onnx's materialises values (a Range to 1e8) without bound; the importer's
    folding computes shape values within its budget."""
    given = _with_lengths(model, lengths) or model
    try:
        return proto.infer_shapes(given, strict_mode=True), [], {}
    except Exception as e:  # InferenceError: its text lists the nodes
        errors = _inference_errors(str(e))
        guesses = {k: v for k, v in lengths.items() if v in STAND_INS}
        if "overflow" in str(e) and guesses:
            # the stand-ins' product passed int64 (four of them flattened together): they are
            # no length the user gave, so inference runs without them (F15 of issue 37)
            rest = {k: v for k, v in lengths.items() if k not in guesses}
            return flattened.completed(lambda m: _infer(m, rest)[:2], model, lengths)
    try:
        return proto.infer_shapes(given, strict_mode=False), errors, {}
    except Exception as e:
        raise OnnxError(f"ONNX shape inference failed: {e}") from None


def _with_lengths(model, lengths: Mapping[str, int]):
    """A copy whose inputs and outputs have the given lengths for their symbolic dimensions
    (None when no dimension is given one)."""
    infos = list(model.graph.input) + list(model.graph.output)
    dims = [d for v in infos for d in v.type.tensor_type.shape.dim]
    if not any(d.HasField("dim_param") and d.dim_param in lengths for d in dims):
        return None
    copy = proto.ModelProto()
    copy.CopyFrom(model)
    for v in list(copy.graph.input) + list(copy.graph.output):
        for d in v.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in lengths:
                d.dim_value = int(lengths[d.dim_param])
    return copy


def _input_params(model) -> dict[str, tuple[str | None, ...]]:
    """The `dim_param`s of the graph's inputs and outputs, by value."""
    graph = model.graph
    return {v.name: tuple(d.dim_param or None for d in v.type.tensor_type.shape.dim)
            for v in [*graph.input, *graph.output] if v.type.tensor_type.HasField("shape")}


_NODE_ERROR = re.compile(r"^\(op_type:([^,)]*)(?:, node name: ([^)]*))?\): (.*)$")


def _inference_errors(text: str) -> list[tuple[str, str, str]]:
    """(op_type, node name, message) of each node in an InferenceError's text; an error
    inside a function's body (onnx's own expansion) is left out."""
    text = text.split("Inference error(s): ", 1)[-1]
    errors = []
    for line in text.splitlines():
        found = _NODE_ERROR.match(line.strip())
        message = found.group(3).strip() if found else ""
        if found and "Inference error(s)" not in message and _ABOUT_SHAPES.search(message):
            errors.append((found.group(1), found.group(2) or "", message))
    return errors


#: Errors about dimensions (others, such as BatchNormalization's count of outputs in training
#: mode, are onnx's stricter reading of an op, not a contradiction in the model).
_ABOUT_SHAPES = re.compile(r"\].*(dimension|shape|rank|perm|incompatible|mismatch|axis|axes)",
                           re.IGNORECASE)


class Shapes:
    """The static shape of every value, with the `dim_param` of each symbolic dimension."""

    def __init__(self, model, lengths: Mapping[str, int]):
        params = _input_params(model)  # before inference puts lengths in their place
        model, self.errors, labels = _infer(model, lengths)
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
            dims = [self._length(vi.name, d, {**lengths, **labels}) for d in tt.shape.dim]
            self.shape[vi.name] = tuple(length for length, _ in dims)
            self.params[vi.name] = tuple(None if param in labels and param not in lengths
                                         else param for _, param in dims)
        for name, names in params.items():
            if len(names) == len(self.params.get(name, ())):
                self.params[name] = names
        self.inputs_params = {p for names in params.values() for p in names if p}
        self._check_lengths(lengths)

    def _check_lengths(self, lengths: Mapping[str, int]) -> None:
        """Every length given names a symbolic dimension of the model (a typo is an error)."""
        params = sorted({p for ps in self.params.values() for p in ps if p})
        for name in lengths:
            if name not in params:
                known = ", ".join(params) if params else "none"
                raise OnnxError(f"lengths: the model has no symbolic dimension {name!r}"
                                f"{did_you_mean(name, params)} (its dimensions: {known})")

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
            where = f" (node {printable(node_name)})" if node_name else ""
            raise UnsupportedOp(f"the shape of {printable(repr(value))}{where} is not static: "
                                f"{shape}{printable(self._hint(value, shape))}")
        return shape  # type: ignore[return-value]

    def _hint(self, value: str, shape) -> str:
        """What would fix the shape: the length of a symbolic input dimension it lacks (the
        one missing, not one already given), else why no length can."""
        if shape is None:
            return ""
        params = self.params.get(value, ()) or (None,) * len(shape)
        missing = [p for d, p in zip(shape, params) if d is None or d < 1]
        given = [p for p in missing if p in self.inputs_params]
        if given:
            p = given[0]
            return f"; give the length of {p!r} (--length {p}=N, or lengths={{{p!r}: N}})"
        return ("; its dimension " + (repr(missing[0]) + " " if missing[0] else "")
                + "is computed at run time, not from the inputs' lengths")

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
        self._axes: dict[str, tuple[Axis, ...]] = {}  # `axes` of each value asked, once named
        self._slots: dict[str, tuple[Slot, ...]] = {}  # `slots` of each value with a shape

    # -- union-find ---------------------------------------------------------------------------
    def slots(self, value: str) -> list[Slot]:
        known = self._slots.get(value)  # (each value is read by its readers' ops too)
        if known is not None:
            return list(known)
        if not self.shapes.known(value):
            return []
        slots = [(value, i) for i in range(len(self.shapes.shape[value]))]
        self._slots[value] = tuple(slots)
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
        """Name a class after the classes its recipe flattens (depth first, with a stack: a
        recipe may be long, or name the class itself through a length-1 dimension)."""
        stack, active = [root], set()
        while stack:
            slot = stack[-1]
            if slot in self._axis:
                stack.pop()
                continue
            parts = [self.find(p) for p in self._recipe.get(slot, ())]
            pending = [p for p in parts if p not in self._axis and p not in active]
            if pending and slot not in active and slot not in self._named:
                active.add(slot)
                stack.extend(reversed(pending))
                continue
            stack.pop()
            active.discard(slot)
            self._axis[slot] = self._name(slot, parts, taken)
        return self._axis[root]

    def _name(self, root: Slot, parts: list[Slot], taken: set[str]) -> Axis:
        length = self.length(root)
        axis = None
        named = [self._axis.get(p) for p in parts]
        distinct = all(named) and len({p.name for p in named}) == len(named)
        if root not in self._named and parts and distinct:
            flat = FlattenedAxis(named)
            free = flat.name not in taken or flat.name in self._flats
            if free and flat.length == length:  # one flattening of the same axes: one axis
                axis = flat
                self._flats.add(flat.name)
        if axis is None:
            base = self._named.get(root) or self._hint.get(root) or default_name(*root)
            name, k = base, 0
            while name in taken:
                k += 1
                name = f"{base}_{k}"
            axis = Axis(name, length)
        taken.add(axis.name)
        return axis

    def axes(self, value: str, node_name: str = "") -> tuple[Axis, ...]:
        """The named axes of a value, in ONNX's positional order (an error when its shape is
        not static: never the empty axes of a scalar). Asked of a value several times (each
        reader's converter, the importer), computed once: the classes are named already."""
        found = self._axes.get(value)
        if found is None:
            self.shapes.of(value, node_name)
            found = tuple(self._axis[self.find(s)] for s in self.slots(value))
            self._axes[value] = found
        return found


def default_name(value: str, position: int) -> str:
    """`fc_weight_d0` for dimension 0 of `fc.weight`: an identifier, so an axis reads as one name
    (`fc_weight_d0:1000`, `(view_d2*view_d3):64`), not as an attribute or an index."""
    words = re.findall(r"[A-Za-z0-9]+", value.removeprefix("onnx::"))
    stem = "_".join(words) or "v"
    return f"{'v' if stem[0].isdigit() else ''}{stem}_d{position}"


def name_axes(shapes: Shapes, consts: Mapping[str, np.ndarray],
              axis_names: Mapping[str, Sequence[str | None]]) -> Naming:
    """Unify the slots of every value of the model through its ops, then name the classes."""
    graph = shapes.model.graph
    named = [v.name for v in graph.input] + [i.name for i in graph.initializer]
    _check_named(shapes, axis_names, named)
    naming = Naming(shapes, axis_names)
    for vi in graph.input:
        naming.slots(vi.name)
    for init in graph.initializer:
        naming.slots(init.name)
    for node in graph.node:
        for name in list(node.input) + list(node.output):
            if name:
                naming.slots(name)
        unify_node(naming, node, consts)
    naming.resolve()
    return naming


def _check_named(shapes: Shapes, axis_names: Mapping[str, Sequence], values: list[str]) -> None:
    """Names given for an input or initializer the model has, no more of them than its axes."""
    for value, names in axis_names.items():
        if value not in values:
            raise OnnxError(f"axis names: the model has no input or initializer {value!r}"
                            f"{did_you_mean(value, values)}")
        rank = len(shapes.shape[value]) if shapes.known(value) else len(names)
        if len(names) != rank:
            raise OnnxError(f"axis names: {value!r} has {rank} axes, {len(names)} names given "
                            "(one per axis; an empty name keeps its default)")
