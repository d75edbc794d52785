"""The op table: each op is declared once, and every other part of ngrules reads it.

An `OpDef` carries everything known about an op: arity, attribute schema, axes inference,
numpy kernel, traits, gradient and a generator of random valid instances. The built-in ops are
declared in `ngrules/builtin_ops.py`; users add their own with `register_op`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

import numpy as np

from ngrules.errors import OpError
from ngrules.ir.axes import Axis, make_axes
from ngrules.ir.filebytes import FileBytes
from ngrules.records import frozen

#: Traits an op may carry; the matcher, checker and test generators read them.
TRAITS = frozenset(
    {
        "elementwise",  # output axes = operand axes; computed point by point
        "commutative",  # f(a, b) == f(b, a)
        "associative",  # f(f(a, b), c) == f(a, f(b, c))
        "view",  # reads its input in another layout, computes nothing
        "reduction",  # removes `reduction_axes`
        "leaf",  # has no arguments (placeholder, constant, variable)
        "multi_output",  # yields several tensors, read through `Output`
        "fused",  # a backend kernel standing for a subgraph
    }
)

#: Attribute kinds; values are normalised to these types when a node is built.
ATTR_KINDS = frozenset({"axes", "axis", "int", "float", "str", "dtype", "array"})

#: Value domains an op asks of its inputs, used to draw test inputs (see `domain`).
DOMAINS = frozenset({"real", "positive", "nonzero"})

REQUIRED = object()


class NotDifferentiable:
    """Marks an op whose gradient is deliberately not defined (autodiff reports it)."""

    def __init__(self, reason: str):
        self.reason = reason

    def __call__(self, node, delta):
        raise OpError(f"{node.op} is not differentiable: {self.reason}")


@frozen
class AttrSpec:
    """One attribute of an op: its name, kind and default (REQUIRED if none)."""

    name: str
    kind: str
    default: Any = REQUIRED
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@frozen
class OpDef:
    """Everything ngrules knows about one op.

    infer(args, attrs) -> (axes, dtype), or a tuple of those for a multi-output op.
    kernel(node) -> a function of the input arrays giving the output array (or tuple);
        it is called once per node when a graph is compiled, so it can precompute.
    grad(node, delta) -> one adjoint (a node or None) per argument; delta is a tuple of
        per-output adjoints (None where absent) for multi-output ops.
    gen(draw, leaf) -> a random valid node of this op; leaf(axes) makes an input.
    domain: the values each argument accepts ("real", "positive", "nonzero"); one entry
        applies to every argument.
    derived: read-only properties computed from a node (e.g. Dot's reduction_axes).
    """

    name: str
    arity: int | None
    infer: Callable
    kernel: Callable
    grad: Callable
    gen: Callable
    attrs: tuple[AttrSpec, ...] = ()
    traits: frozenset[str] = frozenset()
    domain: tuple[str, ...] = ("real",)
    derived: Mapping[str, Callable] = field(default_factory=dict)
    outputs: int = 1
    doc: str = ""

    def attr(self, name: str) -> AttrSpec | None:
        return next((a for a in self.attrs if a.name == name), None)

    def has(self, trait: str) -> bool:
        return trait in self.traits

    def arg_domain(self, index: int) -> str:
        return self.domain[index] if index < len(self.domain) else self.domain[-1]


OPS: dict[str, OpDef] = {}

_FIELDS = ("infer", "kernel", "grad", "gen")


def _check_opdef(op: OpDef) -> None:
    """Reject a half-specified op with a message naming what is missing."""
    if not isinstance(op.name, str) or not op.name.isidentifier() or not op.name[0].isupper():
        raise OpError(f"op name {op.name!r} must be an identifier starting with a capital")
    if op.arity is not None and (not isinstance(op.arity, int) or op.arity < 0):
        raise OpError(f"op {op.name}: arity must be a non-negative int or None (variadic)")
    missing = [f for f in _FIELDS if not callable(getattr(op, f))]
    if missing:
        raise OpError(f"op {op.name} is missing {', '.join(missing)} (each must be callable)")
    unknown = set(op.traits) - TRAITS
    if unknown:
        raise OpError(f"op {op.name}: unknown traits {sorted(unknown)}; known: {sorted(TRAITS)}")
    for a in op.attrs:
        if a.kind not in ATTR_KINDS:
            raise OpError(f"op {op.name}: attribute {a.name!r} has unknown kind {a.kind!r}")
    bad = set(op.domain) - DOMAINS
    if bad or not op.domain:
        raise OpError(f"op {op.name}: domain must be drawn from {sorted(DOMAINS)}")
    if (op.outputs > 1) != ("multi_output" in op.traits):
        raise OpError(f"op {op.name}: outputs > 1 exactly when the op has the multi_output trait")


def register_op(
    name: str,
    *,
    arity: int | None,
    infer: Callable,
    kernel: Callable,
    grad: Callable,
    gen: Callable,
    attrs: tuple[AttrSpec, ...] = (),
    traits: frozenset[str] | set[str] = frozenset(),
    domain: tuple[str, ...] = ("real",),
    derived: Mapping[str, Callable] | None = None,
    outputs: int = 1,
    doc: str = "",
) -> OpDef:
    """Add an op to the table, after which builders, the executor, autodiff and rules know it."""
    op = OpDef(
        name=name,
        arity=arity,
        infer=infer,
        kernel=kernel,
        grad=grad,
        gen=gen,
        attrs=tuple(attrs),
        traits=frozenset(traits),
        domain=tuple(domain),
        derived=dict(derived or {}),
        outputs=outputs,
        doc=doc,
    )
    _check_opdef(op)
    if name in OPS:
        raise OpError(f"op {name} is already registered")
    OPS[name] = op
    return op


#: Ops a model's reader entered at run time (composites, `ngrules.ir.composite`: ONNX's `Gemm`,
#: `LRN`, ... kept whole): ops like any other, but never offered as a "did you mean" to someone
#: who mistyped an op's name, whatever model the process happened to read before.
READ_FROM_MODELS: set[str] = set()


def suggested_ops() -> list[str]:
    """The op names a misspelt op name is compared with: the table without `READ_FROM_MODELS`."""
    return [name for name in OPS if name not in READ_FROM_MODELS]


def get_op(name: str) -> OpDef:
    """The op called `name`, or an error suggesting the closest known names."""
    op = OPS.get(name)
    if op is None:
        raise OpError(f"unknown op {name!r}{did_you_mean(name, suggested_ops())}")
    return op


def did_you_mean(name: str, choices) -> str:
    """A ' (did you mean ...?)' suffix, or '' when nothing is close."""
    import difflib  # for error messages only: not imported at every start

    choices = list(choices)
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.6)
    if not close and len(name) >= 2:
        lowered = name.lower()
        close = [c for c in choices if c.lower().startswith(lowered)][:3]
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def normalize_attrs(op: OpDef, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Check attributes against the op's schema, fill defaults, convert to canonical types."""
    given = 0
    out: dict[str, Any] = {}
    for spec in op.attrs:
        value = attrs.get(spec.name, REQUIRED)
        if value is REQUIRED:
            value = spec.default
        else:
            given += 1
        if value is REQUIRED:
            _check_known(op, attrs)
            raise OpError(f"op {op.name} needs the attribute {spec.name!r}")
        kind = spec.kind
        try:
            if kind == "axes":
                value = make_axes(value)
            elif kind == "axis":
                if not isinstance(value, Axis):
                    raise TypeError
            elif kind == "int":
                if isinstance(value, bool) or int(value) != value:
                    raise TypeError
                value = int(value)
            elif kind == "float":
                value = float(value)
            elif kind == "str":
                if not isinstance(value, str):
                    raise TypeError
            elif kind == "dtype":
                value = np.dtype(value)
            elif kind == "array":
                value = frozen_array(value)
        except (TypeError, ValueError):
            _check_known(op, attrs)
            raise OpError(
                f"op {op.name}: attribute {spec.name!r} must be of kind {kind}, got {value!r}"
            ) from None
        out[spec.name] = value
    if given != len(attrs):
        _check_known(op, attrs)
    return out


def frozen_array(value) -> np.ndarray:
    """A read-only array of the value: an array no one can write (a constant's own value, a
    view of immutable bytes such as an ONNX model's weights) as it is, anything else copied."""
    if isinstance(value, np.ndarray) and _immutable(value):
        return value
    value = np.array(value, copy=True)
    value.setflags(write=False)
    return value


def _immutable(array: np.ndarray) -> bool:
    """Whether neither the array nor anything it views can be written through numpy (the
    bytes it views are `bytes`, or `FileBytes` that only a rewrite given them writes)."""
    while isinstance(array, np.ndarray):
        if array.flags.writeable:
            return False
        array = array.base
    if isinstance(array, memoryview):
        array = array.obj
    return array is None or isinstance(array, (bytes, FileBytes))


def _check_known(op: OpDef, attrs: Mapping[str, Any]) -> None:
    """Raise for the first attribute the op does not take."""
    known = {a.name for a in op.attrs}
    for key in attrs:
        if key not in known:
            hint = did_you_mean(key, known) if known else " (it takes no attributes)"
            raise OpError(f"op {op.name} has no attribute {key!r}{hint}")
