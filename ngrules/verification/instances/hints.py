"""Guard hints: what a rule's guards fix (ranks, dtype, axes, values), read before drawing."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ngrules.lang.rules import Rule
from ngrules.lang.syntax import EAttr, EBinary, ECall, ENum, EStr, EUnary, EVar, Guard, Let


# -- guard hints --------------------------------------------------------------------------------
@dataclass
class Hints:
    """What the guards say that can be built in: a rank range per variable, a dtype."""

    ranks: dict[str, tuple[int, int]] = field(default_factory=dict)
    dtype: np.dtype | None = None
    equations: dict[str, list] = field(default_factory=dict)  # v -> exprs v.axes must equal
    same: list[tuple[str, str]] = field(default_factory=list)  # (u, v): u.axes == v.axes
    values: dict[str, list] = field(default_factory=dict)  # v -> exprs value(v) must equal
    dtypes: dict[str, np.dtype] = field(default_factory=dict)  # v -> v.dtype == "..."
    casts: dict[str, np.dtype] = field(default_factory=dict)  # cast node v -> its dtype
    attrs: dict[str, dict] = field(default_factory=dict)  # v -> {attr: value}: `v.attr == 1`


def _rank_of(e) -> str | None:
    """The variable v when e is `len(v.axes)` or `v.rank`."""
    if isinstance(e, ECall) and e.func == "len" and len(e.args) == 1:
        e = e.args[0]
        ok = isinstance(e, EAttr) and e.name == "axes"
    else:
        ok = isinstance(e, EAttr) and e.name == "rank"
    return e.obj.name if ok and isinstance(e.obj, EVar) else None


def _axes_of(e) -> str | None:
    """The variable v when e is `v.axes`."""
    ok = isinstance(e, EAttr) and e.name == "axes" and isinstance(e.obj, EVar)
    return e.obj.name if ok else None


_RANGES = {
    "==": lambda n: (n, n),
    ">=": lambda n: (n, 99),
    ">": lambda n: (n + 1, 99),
    "<=": lambda n: (0, n),
    "<": lambda n: (0, n - 1),
}


def _value_of(e) -> str | None:
    """The variable v when e is `value(v)`."""
    ok = isinstance(e, ECall) and e.func == "value" and len(e.args) == 1
    return e.args[0].name if ok and isinstance(e.args[0], EVar) else None


#: Node properties, not op attributes: `c.position == 0` fixes an attribute, `x.rank` does not.
_NOT_ATTRS = frozenset({"axes", "rank", "dtype", "length", "size", "name", "op"})
_INVERSE = {"*": "/", "/": "*", "+": "-", "-": "+"}


def isolate(side, other) -> tuple[str, object] | None:
    """(v, e) when `side == other` says `value(v) == e`: value(v) is found in side under
    + - * / and the arithmetic is undone on other (`value(c) * size(m) == size(x)` gives
    `c`, `size(x) / size(m)`). None when side holds no value(v)."""
    name = _value_of(side)
    if name is not None:
        return name, other
    if not (isinstance(side, EBinary) and side.op in _INVERSE):
        return None
    inverse = _INVERSE[side.op]
    found = isolate(side.left, EBinary(inverse, other, side.right))
    if found is None:  # value(v) on the right: l + v, l * v undone alike; l - v, l / v not
        undo = (inverse, other, side.left) if side.op in "+*" else (side.op, side.left, other)
        found = isolate(side.right, EBinary(*undo))
    return found


def _hint_equal(left, right, hints: Hints) -> None:
    """What `left == right` says: a dtype, axes equal to an expression, a constant's value."""
    if isinstance(right, EStr) and isinstance(left, EAttr) and left.name == "dtype":
        if isinstance(left.obj, EVar):
            hints.dtypes.setdefault(left.obj.name, np.dtype(right.value))
        hints.dtype = np.dtype(right.value)
        return
    if (isinstance(left, EAttr) and isinstance(left.obj, EVar) and left.name not in _NOT_ATTRS
            and isinstance(right, (ENum, EStr))):
        hints.attrs.setdefault(left.obj.name, {})[left.name] = right.value
    names = (_axes_of(left), _axes_of(right))
    if None not in names:
        hints.same.append(names)
    for name, other in zip(names, (right, left)):
        if name is not None:
            hints.equations.setdefault(name, []).append(other)
    for found in (isolate(left, right), isolate(right, left)):
        if found is not None:
            hints.values.setdefault(found[0], []).append(found[1])


_FLIPPED = {"==": "==", ">=": "<=", ">": "<", "<=": ">=", "<": ">", "!=": "!="}


def _normal(e):
    """A comparison with its constant on the right (`2 == len(x.axes)` as `len(x.axes) == 2`)."""
    flip = isinstance(e, EBinary) and e.op in _FLIPPED and isinstance(e.left, ENum)
    return EBinary(_FLIPPED[e.op], e.right, e.left) if flip else e


def _is_rank_bound(e) -> bool:
    """e is `len(v.axes) op n` or `v.rank op n` for a comparison op."""
    ok = isinstance(e, EBinary) and e.op in _RANGES and isinstance(e.right, ENum)
    return ok and _rank_of(e.left) is not None


def _same_length(e) -> tuple[str, object] | None:
    """(v, E) when e is `len(v.axes) == len(E)` with E not a number."""
    if not (isinstance(e, EBinary) and e.op == "=="):
        return None
    for a, b in ((e.left, e.right), (e.right, e.left)):
        is_len = isinstance(b, ECall) and b.func == "len" and len(b.args) == 1
        name = _rank_of(a) if isinstance(a, ECall) else None
        if name is not None and is_len and _axes_of(b.args[0]) != name:
            return name, b.args[0]
    return None


def _hint(e, hints: Hints) -> None:
    e = _normal(e)
    nonzero = isinstance(e, EBinary) and e.op == "!=" and isinstance(e.right, ENum)
    if nonzero and e.right.value == 0 and _rank_of(e.left) is not None:  # a rank not 0
        e = EBinary(">", e.left, e.right)
    if isinstance(e, EBinary) and e.op == "and":
        _hint(e.left, hints)
        _hint(e.right, hints)
    elif _same_length(e) is not None:  # len(v.axes) == len(E): E's own axes are one answer
        name, other = _same_length(e)
        hints.equations.setdefault(name, []).append(other)
    elif _is_rank_bound(e):
        name = _rank_of(e.left)
        lo, hi = _RANGES[e.op](int(e.right.value))
        old = hints.ranks.get(name, (0, 99))
        hints.ranks[name] = (max(lo, old[0]), min(hi, old[1]))
    elif isinstance(e, EBinary) and e.op == "==":
        _hint_equal(e.left, e.right, hints)
    elif isinstance(e, ECall) and e.func == "is_scalar" and isinstance(e.args[0], EVar):
        hints.ranks[e.args[0].name] = (0, 0)
    elif isinstance(e, EUnary) and e.op == "not" and isinstance(e.operand, ECall):
        call = e.operand
        if call.func == "is_scalar" and isinstance(call.args[0], EVar):
            hints.ranks[call.args[0].name] = (1, 99)


def _inlined(e, lets: dict):
    """e with the let values it names written out (`size(normalised)` as
    `size(s.reduction_axes)`), so a hint can be computed from the pattern's own nodes."""
    if isinstance(e, EVar):
        return lets.get(e.name, e)
    if isinstance(e, tuple):
        return tuple(_inlined(x, lets) for x in e)
    if not dataclasses.is_dataclass(e):
        return e
    changes = {f.name: _inlined(getattr(e, f.name), lets) for f in dataclasses.fields(e)
               if f.name not in ("span", "kwarg_spans")}
    return dataclasses.replace(e, **changes)


def _cast_names(patterns) -> set[str]:
    """Names bound to a node of an op with a `dtype` attribute (`h @ Cast(x)`): a guard on
    its dtype sets that attribute, not the dtype of the instance's inputs."""
    from ngrules.ir.ops import OPS
    from ngrules.lang.syntax import PNamed, POp, PVar

    names, todo = set(), list(patterns)
    while todo:
        p = todo.pop()
        inner = p.pattern if isinstance(p, PNamed) else p
        op = inner.op if isinstance(inner, POp) else getattr(inner, "kind", None)
        if isinstance(p, (PNamed, PVar)) and op in OPS and any(
                a.name == "dtype" for a in OPS[op].attrs):
            names.add(p.name)
        todo += list(getattr(inner, "args", ()))
        if isinstance(inner, PNamed):
            todo.append(inner)
    return names


def guard_hints(rule: Rule) -> Hints:
    """What the rule's guards state plainly (ranks, dtype, axes equations, constant values),
    lets written out; other guards are honoured by filtering. A dtype guard on a cast's
    node (`h.dtype == "float16"` with `h @ Cast(x)`) is that cast's attribute; a dtype guard
    on any other node is the instance's dtype."""
    hints, lets = Hints(), {}
    for clause in rule.clauses:
        if isinstance(clause, Let):
            lets[clause.name] = _inlined(clause.expr, lets)
        elif isinstance(clause, Guard):
            try:
                _hint(_inlined(clause.expr, lets), hints)
            except (TypeError, ValueError):
                continue
    casts = _cast_names(rule.roots)
    if casts & set(hints.dtypes):
        hints.casts = {n: d for n, d in hints.dtypes.items() if n in casts}
        leaves = [d for n, d in hints.dtypes.items() if n not in casts]
        hints.dtype = leaves[0] if leaves else None
    return hints
