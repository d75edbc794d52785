"""Instances of a rule's pattern: random graphs the rule should match, for verification.

A builder walks the pattern from its roots down, choosing the axes every node must have so that
the op table's inference succeeds: elementwise operands get their parent's axes, reductions and
`Dot` add fresh axes to reduce, `Broadcast` operands take a subset of its axes, and so on.
Variables become placeholders (one node per name), typed variables random nodes of their kind,
literals constants (bare or broadcast), optional wrappers are drawn present or absent and
commutative operands in either order.

Before drawing, the pattern's positions are grouped into classes that must have the same axes
(`constraints`: a named node wherever used, elementwise operands and results, `u.axes == v.axes`
guards); the first axes chosen in a class hold for all of it, so a named node built at its first
use already fits its later uses. Guards are honoured by construction when they fix a rank, the
dtype, axes (`m.axes == x.axes[:1]`) or a constant's value (`value(n) * size(m) == size(x)`),
computed from what is built or decided so far; otherwise by discarding instances the rule does
not fire on. Every choice is a hypothesis draw, so a failing instance shrinks to a small one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from ngrules.errors import NgrulesError
from ngrules.ir.axes import Axes, flatten_groups
from ngrules.ir.graph import Node, make_node, toposort
from ngrules.ir.ops import OPS
from ngrules.lang.rules import Rule
from ngrules.lang.syntax import (
    EAttr,
    EBinary,
    ECall,
    ENum,
    EStr,
    EUnary,
    EVar,
    Guard,
    PLit,
    PNamed,
    POp,
    PVar,
    children,
)

Domain = str  # "real", "positive" or "nonzero", as in the op table
_STRICTNESS = {"real": 0, "nonzero": 1, "positive": 2}
_AXIS_NAMES = "abcdefghijklmopqrstuvwxyz"  # lowercase: never clashes with opgen's pool (A-F)
_MAX_RANK = 3
#: Axis lengths 1-5, with 1 drawn more often (guards about unit axes are common).
_LENGTHS = st.sampled_from((1, 1, 2, 3, 4, 5))
_VALUES = st.sampled_from((1.0, 2.0, 3.0, 4.0, 5.0, 0.5, 0.25, 1.5, 0.1))
_NEGATE = st.sampled_from((False, False, True))


class Reject(Exception):
    """This attempt cannot become an instance of the pattern; the message says why."""


# -- value domains ------------------------------------------------------------------------------
def strictest(a: Domain, b: Domain) -> Domain:
    return a if _STRICTNESS[a] >= _STRICTNESS[b] else b


#: Ops whose output is positive when their arguments are (so a positive need passes down).
_VIEWS = ("Broadcast", "ReorderAxes", "Transpose", "Flatten", "Unflatten", "Slice", "Concat")
_KEEPS_POSITIVE = frozenset(
    ("Add", "Multiply", "Divide", "Maximum", "Minimum", "Sum", "Max", "Min", "Prod", "Dot")
    + ("DotLowDimension", "Sqrt", "Reciprocal")
    + _VIEWS
)
#: Ops whose output is nonzero when their arguments are.
_KEEPS_NONZERO = frozenset(
    ("Multiply", "Divide", "Reciprocal", "Negative", "Square", "Prod") + _VIEWS
)


def argument_domain(op: str, index: int, need: Domain) -> Domain:
    """The values argument `index` of op should take: the op's own domain, and enough that the
    output lands in `need` when the op keeps signs (positive under Add, nonzero under Multiply)."""
    own = OPS[op].arg_domain(index)
    if need == "real" or op == "Exp":
        return own
    if need == "nonzero" and op in _KEEPS_NONZERO or op == "Square":
        return strictest(own, "nonzero")
    return strictest(own, "positive") if op in _KEEPS_POSITIVE else own


def placeholder_domains(outputs: Sequence[Node]) -> dict[Node, Domain]:
    """For each placeholder, the strictest domain any of its users asks of it directly."""
    domains: dict[Node, Domain] = {}
    for node in toposort(outputs):
        if node.op == "Placeholder":
            domains.setdefault(node, "real")
        for i, arg in enumerate(node.args):
            if arg.op == "Placeholder":
                domains[arg] = strictest(domains.get(arg, "real"), OPS[node.op].arg_domain(i))
    return domains


def domain_values(rng: np.random.Generator, shape, dtype, domain: Domain) -> np.ndarray:
    """Random values in a domain, kept away from zero where the domain asks it."""
    if domain == "real":
        return rng.uniform(-2.0, 2.0, shape).astype(dtype)
    magnitude = rng.uniform(0.5, 2.0, shape)
    if domain == "nonzero":
        magnitude *= rng.choice([-1.0, 1.0], shape)
    return magnitude.astype(dtype)


def feeds_for(
    outputs: Sequence[Node], seed: int, domains: dict[Node, Domain] | None = None
) -> dict[Node, np.ndarray]:
    """A value for every placeholder under outputs, from its domain, rounded for readability."""
    rng = np.random.default_rng(seed)
    known = placeholder_domains(outputs)
    for node, domain in (domains or {}).items():
        if node in known:
            known[node] = strictest(known[node], domain)
    return {
        node: np.round(domain_values(rng, node.axes.lengths, np.float64, d), 3).astype(node.dtype)
        for node, d in known.items()
    }


def as_float64(outputs: Sequence[Node]) -> tuple[list[Node], dict[Node, Node]]:
    """The same graph in float64 (leaves rebuilt, the rest re-inferred), and old -> new leaves."""
    memo: dict[Node, Node] = {}
    for node in toposort(outputs):
        attrs = dict(node.attrs)
        if node.op in ("Placeholder", "Variable"):
            attrs["dtype"] = np.float64
        elif node.op == "Constant":
            attrs["value"] = np.asarray(attrs["value"], np.float64)
        memo[node] = make_node(node.op, [memo[a] for a in node.args], **attrs)
    return [memo[o] for o in outputs], memo


# -- guard hints --------------------------------------------------------------------------------
@dataclass
class Hints:
    """What the guards say that can be built in: a rank range per variable, a dtype."""

    ranks: dict[str, tuple[int, int]] = field(default_factory=dict)
    dtype: np.dtype | None = None
    equations: dict[str, list] = field(default_factory=dict)  # v -> exprs v.axes must equal
    same: list[tuple[str, str]] = field(default_factory=list)  # (u, v): u.axes == v.axes
    values: dict[str, list] = field(default_factory=dict)  # v -> exprs value(v) must equal


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
        hints.dtype = np.dtype(right.value)
        return
    names = (_axes_of(left), _axes_of(right))
    if None not in names:
        hints.same.append(names)
    for name, other in zip(names, (right, left)):
        if name is not None:
            hints.equations.setdefault(name, []).append(other)
    for found in (isolate(left, right), isolate(right, left)):
        if found is not None:
            hints.values.setdefault(found[0], []).append(found[1])


def _is_rank_bound(e) -> bool:
    """e is `len(v.axes) op n` or `v.rank op n` for a comparison op."""
    ok = isinstance(e, EBinary) and e.op in _RANGES and isinstance(e.right, ENum)
    return ok and _rank_of(e.left) is not None


def _hint(e, hints: Hints) -> None:
    if isinstance(e, EBinary) and e.op == "and":
        _hint(e.left, hints)
        _hint(e.right, hints)
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


def guard_hints(rule: Rule) -> Hints:
    """What the rule's guards state plainly (ranks, dtype, axes equations, constant values);
    other guards are honoured by filtering."""
    hints = Hints()
    for clause in rule.clauses:
        if isinstance(clause, Guard):
            try:
                _hint(clause.expr, hints)
            except (TypeError, ValueError):
                continue
    return hints


# -- axes constraints: which positions of a pattern have the same axes ---------------------------
def _key(p) -> object:
    """What identifies a pattern position: its name when it has one, else the object itself."""
    named = isinstance(p, (PVar, PNamed)) and p.name != "_"
    return p.name if named else id(p)


def _positions(roots):
    """Every position of the patterns, the inside of a named sub-pattern once."""
    seen, stack = set(), list(roots)
    while stack:
        p = stack.pop()
        if isinstance(p, PNamed):
            if p.name in seen:
                continue
            seen.add(p.name)
        yield p
        stack.extend(children(p))


def _equal_axes(p) -> tuple:
    """The positions the op table gives p's own axes: a named pattern's inside, the operands
    of an elementwise op (optional or not: either way the position has the operand's axes)."""
    if isinstance(p, PNamed):
        return (p.pattern,)
    return p.args if isinstance(p, POp) and OPS[p.op].has("elementwise") else ()


def _intersect(a: tuple[int, int], b: tuple[int, int] | None) -> tuple[int, int]:
    return a if b is None else (max(a[0], b[0]), min(a[1], b[1]))


@dataclass
class Constraints:
    """Classes of pattern positions that have the same axes in every instance (unified over
    named patterns, elementwise ops and `u.axes == v.axes` guards), and per class what the
    guards say: a rank range, expressions the axes equal."""

    classes: dict = field(default_factory=dict)  # position key -> class
    ranks: dict = field(default_factory=dict)  # class -> (lowest, highest) rank
    equations: dict = field(default_factory=dict)  # class -> expressions its axes equal

    def of(self, p) -> object | None:
        """p's class; None for an untracked unnamed position (`_`, or outside the rule)."""
        key = _key(p)
        return self.classes.get(key, key if isinstance(key, str) else None)

    def names(self) -> dict[str, object]:
        return {k: c for k, c in self.classes.items() if isinstance(k, str)}


def constraints(roots, hints: Hints) -> Constraints:
    """Union-find over the patterns' positions, then the guards' facts gathered per class."""
    parent: dict = {}

    def find(k):
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k

    pairs = [(_key(p), _key(q)) for p in _positions(roots) for q in (p, *_equal_axes(p))]
    for a, b in [*pairs, *hints.same]:
        parent[find(a)] = find(b)
    cons = Constraints({k: find(k) for k in parent})
    scalars = [p for p in _positions(roots) if isinstance(p, PVar) and p.kind == "scalar"]
    ranked = [(PVar(name), rng) for name, rng in hints.ranks.items()]
    for p, rng in [*ranked, *((p, (0, 0)) for p in scalars)]:
        c = cons.of(p)
        cons.ranks[c] = _intersect(rng, cons.ranks.get(c))
    for name, exprs in hints.equations.items():
        cons.equations.setdefault(cons.of(PVar(name)), []).extend(exprs)
    return cons


# -- axes choices -------------------------------------------------------------------------------
def same_axes(a: Axes, b: Axes) -> bool:
    return a == b and a.lengths == b.lengths


def interleave(draw, keep: Axes, extra: Axes, canonical: Axes | None = None) -> Axes:
    """keep's axes in their order with extra's axes (in a random order) at random places; or,
    as often, the `canonical` layout (the one lowering rules ask for), when given."""
    if canonical is not None and draw(st.booleans()):
        return canonical
    out = list(keep)
    for axis in draw(st.permutations(list(extra))):
        out.insert(draw(st.integers(0, len(out))), axis)
    return Axes(out)


def _groups(draw, n: int) -> list[int]:
    sizes, left = [], n
    while left:
        sizes.append(draw(st.integers(1, left)))
        left -= sizes[-1]
    return sizes


def regroup(draw, axes: Axes) -> Axes:
    """axes with random consecutive runs flattened together."""
    return flatten_groups(axes, _groups(draw, len(axes)))


# -- plans: an op's argument axes and attributes for given output axes ---------------------------
Plan = Callable[["Builder", Axes, list], tuple[list[Axes], dict]]


def _plan_elementwise(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    return [want] * len(forced), {}


def _plan_transpose(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    return [Axes(want[::-1])], {}


def _plan_reorder(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    arg = forced[0] if forced[0] is not None else Axes(b.draw(st.permutations(list(want))))
    return [arg], {"axes": want}


def _plan_broadcast(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    arg = forced[0]
    if arg is None:
        kept = [a for a in want if b.draw(st.booleans())]
        arg = Axes(b.draw(st.permutations(kept)))
    return [arg], {"axes": want}


def _plan_flatten(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    return [forced[0] if forced[0] is not None else Axes(want.leaves())], {"axes": want}


def _plan_unflatten(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    return [forced[0] if forced[0] is not None else regroup(b.draw, want)], {"axes": want}


def _plan_reduce(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    arg = forced[0]
    if arg is None:
        red = b.fresh(b.draw(st.integers(1, 2)))
        arg = interleave(b.draw, want, red, want + red)
    red = Axes(b.draw(st.permutations(list(arg - want))))
    return [arg], {"reduction_axes": red}


def _plan_dot(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    fx, fy = forced
    if fx is not None and fy is not None:
        return [fx, fy], {}
    if fx is not None:
        red = fx - want
        return [fx, interleave(b.draw, want[len(fx - red) :], red)], {}
    if fy is not None:
        red = fy - want
        return [interleave(b.draw, want[: len(want) - len(fy - red)], red), fy], {}
    k = b.draw(st.integers(0, len(want)))
    red = b.fresh(b.draw(st.integers(0, 3)))
    x_out, y_out = want[:k], want[k:]
    return [
        interleave(b.draw, x_out, red, x_out + red),
        interleave(b.draw, y_out, red, red + y_out),
    ], {}


def _plan_dot_low(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    if len(want) > 2:
        raise Reject(f"DotLowDimension cannot have the {len(want)} axes {want!r}")
    k = b.fresh(1)
    if len(want) == 2:
        return [want[:1] + k, k + want[1:]], {"axes": want}
    if len(want) == 1 and b.draw(st.booleans()):
        return [k, k + want], {"axes": want}
    return [want + k, k], {"axes": want}


PLANS: dict[str, Plan] = {
    "Transpose": _plan_transpose,
    "ReorderAxes": _plan_reorder,
    "Broadcast": _plan_broadcast,
    "Flatten": _plan_flatten,
    "Unflatten": _plan_unflatten,
    "Sum": _plan_reduce,
    "Max": _plan_reduce,
    "Min": _plan_reduce,
    "Prod": _plan_reduce,
    "Dot": _plan_dot,
    "DotLowDimension": _plan_dot_low,
}


def _op_at(p) -> str:
    """The op a position's node is known to be ("" if none): for the shape of free axes."""
    if isinstance(p, PNamed):
        return _op_at(p.pattern)
    if isinstance(p, POp) and not p.optional:
        return p.op
    return p.kind if isinstance(p, PVar) and p.kind in OPS else ""


def plan_for(op: str) -> Plan | None:
    """How to choose op's argument axes for given output axes (None: use the op's generator)."""
    if op in PLANS:
        return PLANS[op]
    return _plan_elementwise if OPS[op].has("elementwise") else None


# -- the builder --------------------------------------------------------------------------------
class Builder:
    """Builds one instance of patterns top-down; `bound` maps pattern names to their nodes.

    Given the rule's `roots`, positions the op table or the guards make equal in axes share a
    class (`constraints`); the first axes chosen for a class are `decided` for all of it, so a
    named node built at its first use already has the axes its later uses need."""

    def __init__(self, draw, dtype=np.float64, hints: Hints | None = None, roots=()):
        self.draw = draw
        self.dtype = np.dtype(dtype)
        self.hints = hints or Hints()
        self.cons = constraints(roots, self.hints)
        self.decided: dict[object, Axes] = {}
        self.bound: dict[str, Node] = {}
        self.domains: dict[Node, Domain] = {}
        self._axis_names = iter(_AXIS_NAMES)
        self._leaf_names = itertools.count()

    # -- axes and leaves ------------------------------------------------------------------------
    def fresh(self, n: int) -> Axes:
        """n new axes of random lengths (1-5)."""
        from ngrules.ir.axes import Axis

        names = [next(self._axis_names, None) for _ in range(n)]
        if None in names:
            raise Reject("the instance needs more axes than there are names")
        return Axes(Axis(name, self.draw(_LENGTHS)) for name in names)

    def free_axes(self, at=None, lo: int = 0) -> Axes:
        """Axes for a node nothing above constrains: the rank its guards ask, else 0-3."""
        low, high = self.cons.ranks.get(self.cons.of(at), (0, _MAX_RANK))
        low, high = max(low, lo), min(high, max(low, lo) + _MAX_RANK)
        if low > high:
            raise Reject(f"the guards ask {getattr(at, 'name', '_')!r} for no possible rank")
        return self.fresh(self.draw(st.integers(low, high)))

    def free_want(self, op: str, at=None) -> Axes:
        """Output axes for an unconstrained op node (Flatten's output is really flattened)."""
        if op == "Flatten":
            return regroup(self.draw, self.free_axes(at, lo=1))
        return self.free_axes(at)

    def placeholder(self, axes: Axes, domain: Domain, name: str = "_") -> Node:
        label = name if name != "_" else f"_{next(self._leaf_names)}"
        node = make_node("Placeholder", name=label, axes=axes, dtype=self.dtype)
        self.domains[node] = strictest(self.domains.get(node, "real"), domain)
        return node

    def scalar_value(self, domain: Domain) -> float:
        """A readable value in the domain: a small count (as a mean's divisor) or a fraction."""
        value = self.draw(_VALUES)
        return -value if domain == "real" and self.draw(_NEGATE) else value

    def literal(self, value: float, want: Axes | None) -> Node:
        """A constant holding value everywhere: a scalar, bare full, or broadcast."""
        axes = want if want is not None else self.free_axes()
        scalar = make_node("Constant", value=np.asarray(value, self.dtype), axes=())
        if not len(axes):
            return scalar
        if self.draw(st.booleans()):
            return make_node("Constant", value=np.full(axes.lengths, value, self.dtype), axes=axes)
        return make_node("Broadcast", (scalar,), axes=axes)

    def constant(self, want: Axes | None, domain: Domain, at=None) -> Node:
        """A known constant: the value a guard asks (`value(c) * size(m) == size(x)`) when it
        can be computed already, else one value everywhere or random values, in the domain."""
        axes = want if want is not None else self.free_axes(at)
        asked = self.solve(self.hints.values.get(getattr(at, "name", "_"), ()), (int, float))
        if asked is not None:
            return self.literal(float(asked), axes)
        if self.draw(st.booleans()) and len(axes):
            rng = np.random.default_rng(self.draw(st.integers(0, 2**16)))
            value = np.round(domain_values(rng, axes.lengths, np.float64, domain), 3)
            return make_node("Constant", value=value.astype(self.dtype), axes=axes)
        return self.literal(self.scalar_value(domain), axes)

    def make(self, op: str, args: Sequence[Node], attrs: dict, want: Axes | None) -> Node:
        try:
            node = make_node(op, args, **attrs)
        except NgrulesError as e:
            raise Reject(f"{op}: {e.message}") from None
        if want is not None and not (node.outputs is None and same_axes(node.axes, want)):
            raise Reject(f"{op} came out with axes {node.axes!r}, not {want!r}")
        return node

    # -- what is known of a position's axes -----------------------------------------------------
    def decide(self, at, axes: Axes | None) -> None:
        """Record axes for at's class (the first choice stands; a conflict rejects later)."""
        c = self.cons.of(at)
        if c is not None and axes is not None:
            self.decided.setdefault(c, axes)

    def known(self, at) -> Axes | None:
        """The axes at's node must have before it is built: those decided for its class, none
        for a rank-0 class, or what a guard equation gives from what is known; else None."""
        c = self.cons.of(at)
        if c in self.decided:
            return self.decided[c]
        if self.cons.ranks.get(c) == (0, 0):
            return Axes()
        return self.solve(self.cons.equations.get(c, ()), Axes)

    def solve(self, exprs, kind) -> object | None:
        """The first of exprs computable from what is built or decided that is a `kind`."""
        from ngrules.lang.expr import evaluate

        env = self.env() if exprs else {}
        for expr in exprs:
            try:
                value = evaluate(expr, env)
            except NgrulesError:
                continue
            if isinstance(value, kind):
                return value
        return None

    def env(self) -> dict[str, Node]:
        """The bound names, and for names not built yet whose axes are decided a stand-in
        placeholder with those axes (enough for guards such as `x.axes[:1]` or `size(x)`)."""
        standins = {
            name: make_node("Placeholder", name=name, axes=self.decided[c], dtype=self.dtype)
            for name, c in self.cons.names().items()
            if c in self.decided and name not in self.bound
        }
        return {**standins, **self.bound}

    def want_for(self, p) -> Axes | None:
        """Axes for p when its parent leaves them open: known ones, or a rank its guards ask."""
        axes = self.known(p)
        if axes is None and self.cons.of(p) in self.cons.ranks:
            axes = self.free_want(_op_at(p), p)
        return axes

    # -- patterns -------------------------------------------------------------------------------
    def build(self, p, want: Axes | None, domain: Domain = "real") -> Node:
        """A node matching pattern p, with axes `want` (None: any)."""
        want = want if want is not None else self.want_for(p)
        self.decide(p, want)
        node = self._build(p, want, domain)
        if node.outputs is None:
            self.decide(p, node.axes)
        return node

    def _build(self, p, want: Axes | None, domain: Domain) -> Node:
        if isinstance(p, PNamed):
            return self._named(p, want, domain)
        if isinstance(p, PVar):
            return self._var(p, want, domain)
        if isinstance(p, PLit):
            return self.literal(p.value, want)
        if p.optional and not self.draw(st.booleans()):
            return self.build(p.args[0], want, domain)
        return self.op(p.op, p.args, want, domain, p)

    def _reuse(self, name: str, want: Axes | None, domain: Domain) -> Node:
        node = self.bound[name]
        if want is not None and not same_axes(node.axes, want):
            raise Reject(f"{name!r} has axes {node.axes!r} but is also used where {want!r} fit")
        if node in self.domains:
            self.domains[node] = strictest(self.domains[node], domain)
        return node

    def _named(self, p: PNamed, want: Axes | None, domain: Domain) -> Node:
        if p.name in self.bound:
            return self._reuse(p.name, want, domain)
        node = self.build(p.pattern, want, domain)
        self.bound[p.name] = node
        return node

    def _var(self, p: PVar, want: Axes | None, domain: Domain) -> Node:
        if p.name in self.bound:
            return self._reuse(p.name, want, domain)
        node = self._typed(p, want, domain)
        if p.name != "_":
            self.bound[p.name] = node
        return node

    def _typed(self, p: PVar, want: Axes | None, domain: Domain) -> Node:
        kind, name = p.kind, p.name
        if kind is None:
            axes = want if want is not None else self.free_axes(p)
            return self.placeholder(axes, domain, name)
        if kind == "scalar":
            if want is not None and len(want):
                raise Reject(f"{name!r} must be a scalar but sits where axes {want!r} are needed")
            return self.placeholder(Axes(), domain, name)
        if kind == "constant":
            return self.constant(want, domain, p)
        if kind not in OPS:
            kind = self.draw(st.sampled_from(sorted(o for o in OPS if kind in OPS[o].traits)))
        return self.op(kind, None, want, domain, p)

    def op(self, op: str, args, want: Axes | None, domain: Domain, at=None) -> Node:
        """A node of op over nodes matching args (None: any arguments) with axes want; `at` is
        the pattern position it is built for."""
        opdef = OPS[op]
        if opdef.has("leaf"):
            return self._leaf(op, want, domain, at)
        if op == "Output":
            return self._output(args, want, domain)
        plan = plan_for(op)
        if plan is None:
            return self._generic(op, args, want, domain)
        args = args if args is not None else (PVar("_"),) * opdef.arity
        want = want if want is not None else self.free_want(op, at)
        self.decide(at, want)
        arg_axes, attrs = plan(self, want, [self.known(a) for a in args])
        for a, ax in zip(args, arg_axes):
            self.decide(a, ax)
        nodes = [
            self.build(a, ax, argument_domain(op, i, domain))
            for i, (a, ax) in enumerate(zip(args, arg_axes))
        ]
        if opdef.has("commutative") and len(nodes) == 2 and self.draw(st.booleans()):
            nodes.reverse()
        return self.make(op, nodes, attrs, want)

    def _leaf(self, op: str, want: Axes | None, domain: Domain, at) -> Node:
        axes = want if want is not None else self.free_axes(at)
        if op == "Constant":
            return self.constant(axes, domain, at)
        if op == "Variable":
            label = f"v{next(self._leaf_names)}"
            initial = self.scalar_value(domain)
            return make_node("Variable", name=label, axes=axes, dtype=self.dtype, initial=initial)
        return self.placeholder(axes, domain, getattr(at, "name", "_"))

    def _output(self, args, want: Axes | None, domain: Domain) -> Node:
        inner = args[0] if args else PVar("_", "multi_output")
        node = self.build(inner, None, domain)
        if node.outputs is None:
            raise Reject(f"Output needs a multi-output node, got {node.op}")
        fits = [i for i, (ax, _) in enumerate(node.outputs) if want is None or same_axes(ax, want)]
        if not fits:
            raise Reject(f"no output of {node.op} has axes {want!r}")
        return self.make("Output", [node], {"index": self.draw(st.sampled_from(fits))}, want)

    def _generic(self, op: str, args, want: Axes | None, domain: Domain) -> Node:
        """An op without a plan: its own generator picks the layout, the pattern the args."""
        sample = OPS[op].gen(self.draw, lambda axes: self.placeholder(axes, "real"))
        if sample.op != op:
            raise Reject(f"the generator of {op} made a {sample.op}")
        args = args if args is not None else (PVar("_"),) * len(sample.args)
        if len(args) != len(sample.args):
            raise Reject(f"{op} was generated with {len(sample.args)} arguments, not {len(args)}")
        nodes = [
            self.build(p, a.axes if a.outputs is None else None, argument_domain(op, i, domain))
            for i, (p, a) in enumerate(zip(args, sample.args))
        ]
        return self.make(op, nodes, dict(sample.attrs), want)


# -- instances ----------------------------------------------------------------------------------
@dataclass
class Instance:
    """A graph built from a rule's pattern, its inputs, and what rewriting with the rule gave.

    `outputs` are the roots (the graph before); `after` the rewritten outputs (None if the
    rewrite raised `error`); `fired` whether the rule rewrote anything; `stop` the engine's
    reason for stopping. `feeds` holds a value for every placeholder.
    """

    rule: Rule | None
    outputs: list[Node]
    feeds: dict[Node, np.ndarray]
    after: list[Node] | None = None
    fired: bool = False
    stop: str = "fixpoint"
    message: str = ""
    error: BaseException | None = None

    @property
    def dtype(self) -> np.dtype:
        return self.outputs[0].dtype

    def __repr__(self) -> str:  # short: hypothesis prints the examples it runs
        name = self.rule.name if self.rule is not None else None
        nodes = len(toposort(self.outputs))
        return f"Instance(rule={name!r}, {nodes} nodes, fired={self.fired})"

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # hypothesis's printer
        printer.text(repr(self))


@dataclass
class Rejected:
    """An attempt that did not give an instance, and why."""

    reason: str


def _build_roots(draw, rule: Rule) -> tuple[list[Node], dict[Node, Domain]]:
    hints = guard_hints(rule)
    dtype = hints.dtype if hints.dtype is not None else np.dtype(np.float64)
    builder = Builder(draw, dtype, hints, rule.roots)
    roots = [builder.build(root, None) for root in rule.roots]
    for r in roots:
        if r.outputs is not None:
            raise Reject(f"the root {r.op} has several outputs")
    return roots, builder.domains


def rewrite_instance(rule: Rule, outputs: list[Node], feeds, fuel: int = 200) -> Instance:
    """Rewrite the outputs with this rule alone and record what happened."""
    from ngrules.engine.driver import rewrite

    inst = Instance(rule, outputs, feeds)
    try:
        res = rewrite(outputs, rule, fuel=fuel)
    except NgrulesError as e:
        inst.error, inst.fired = e, True
        return inst
    inst.after, inst.fired = res.outputs, any(f.rule == rule.name for f in res.trace)
    stats = res.stats.get(rule.name)
    if not inst.fired and stats is not None and stats.first_failure is not None:
        inst.error, inst.fired = stats.first_failure, True  # rejected by the engine: ill-formed
    inst.stop, inst.message = res.stop, res.message
    return inst


def taken_by(earlier: Sequence, root: Node) -> str | None:
    """The first of the earlier (compiled, single-root) rules of a pass that matches at root:
    in the pass it wins, so the later rule never sees this node."""
    for compiled in earlier:
        try:
            found = compiled.apply(root)
        except NgrulesError:
            return compiled.name
        if found is not None:
            return compiled.name
    return None


def earlier_rules(rule: Rule, ruleset) -> list:
    """The single-root rules tried before `rule` in its pass (compiled), given a RuleSet."""
    from ngrules.engine.compiled import CompiledRule

    order = ruleset.passes.get(rule.pass_name, ()) if ruleset is not None else ()
    before = order[: order.index(rule)] if rule in order else ()
    return [CompiledRule(r) for r in before if len(r.roots) == 1]


def why_not(rule: Rule, roots: Sequence[Node]) -> str:
    """The first pattern element or guard that failed at the instance's root (from explain)."""
    from ngrules.engine.explain import explain

    misses = explain(rule, list(roots), limit=1).misses
    return f"`{misses[0].text}` {misses[0].found}" if misses else "no candidate root"


@st.composite
def attempts(draw, rule: Rule, earlier: Sequence = ()) -> Instance | Rejected:
    """One try at an instance of the rule: an Instance (rewritten), or Rejected with a reason.
    `earlier` are compiled rules that come first in the rule's pass (see `earlier_rules`)."""
    try:
        roots, domains = _build_roots(draw, rule)
    except Reject as r:
        return Rejected(str(r))
    winner = taken_by(earlier, roots[0])
    if winner is not None:
        return Rejected(f"rule {winner} comes first in pass {rule.pass_name} and takes it")
    feeds = feeds_for(roots, draw(st.integers(0, 2**32 - 1)), domains)
    inst = rewrite_instance(rule, roots, feeds)
    if not inst.fired:
        return Rejected(f"the rule did not fire: {why_not(rule, roots)}")
    return inst


def instances(rule: Rule, ruleset=None) -> st.SearchStrategy[Instance]:
    """Instances of the rule's pattern that the rule fires on, with inputs and the rewrite.
    Given the rule's RuleSet, nodes an earlier rule of its pass would take are left out."""
    built = attempts(rule, earlier_rules(rule, ruleset))
    return built.filter(lambda attempt: isinstance(attempt, Instance))
