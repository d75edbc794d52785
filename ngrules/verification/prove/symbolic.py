"""A graph evaluated at one generic element, for every length of its axes (issue 35).

Each axis is an integer index variable `i.a` and a length `n.a` (a positive real, or the axis's
own length when it is not one of the groups the shapes are enumerated over, `groups`); an input
is an uninterpreted function of the indices of its axes, by name. Views by name (`Broadcast`,
`ReorderAxes`) keep the term; `Reverse` substitutes n - 1 - i for each reversed index;
elementwise ops map their encoding (`scalars.ENCODINGS`); `Sum`, `Max`, `Min` and `Dot` reduce
over their axes into a term whose length is symbolic:

- a sum is put in a normal form (z3's sum of monomials; the factors that do not depend on the
  reduced indices taken out, nested sums merged into one over the union of their axes, a sum of
  a term that does not depend on them is the term times the lengths);
- what remains is one uninterpreted value per (reduced axes, body) pair, a function of the
  indices it still depends on: equal bodies give equal sums, nothing else is assumed of them;
- a max or min of a term that does not depend on the reduced indices is the term (lengths are
  at least 1); of a sum, the part that does not depend on them comes out; else uninterpreted.

Claims proved this way hold for every length and every value of the uninterpreted sums and
maxima, so they are sound for the true ones; an unproved claim proves nothing either way.
"""

from __future__ import annotations

import z3

from ngrules.ir import declared
from ngrules.ir.graph import Node, toposort
from ngrules.ir.ops import OPS
from ngrules.verification.prove.scalars import ENCODINGS, Sym

#: Ops evaluated at a generic element (views by name, reductions, Dot); elementwise ops too.
VIEWS = frozenset({"Broadcast", "ReorderAxes"})
REDUCTIONS = frozenset({"Sum", "Max", "Min", "Dot"})


class Unsupported(Exception):
    """The graph has an op or a term the generic element cannot stand for."""


class Generic:
    """The terms of one proof: input functions, index and length variables, reduced values."""

    def __init__(self, lengths: dict[str, object]):
        self.lengths = lengths  # axis name -> z3 length (symbolic for a group)
        self.reduced: dict[str, tuple] = {}  # function name -> (kind, axes, body)
        self.leaves: dict[Node, Sym] = {}
        self._keys: dict[tuple, z3.FuncDeclRef] = {}
        self._deps: dict[int, frozenset] = {}

    def index(self, name: str):
        return z3.Int(f"i.{name}")

    def length(self, name: str):
        return self.lengths[name]

    def depends(self, term) -> frozenset:
        """The index names a term depends on."""
        key = term.get_id()
        if key not in self._deps:
            if z3.is_const(term) and term.decl().name().startswith("i."):
                found = frozenset({term.decl().name()[2:]})
            else:
                found = frozenset().union(*(self.depends(c) for c in term.children()))
            self._deps[key] = found
        return self._deps[key]

    def _atom(self, kind: str, axes: frozenset, body):
        key = (kind, tuple(sorted(axes)), body.sexpr())
        free = sorted(self.depends(body) - axes)
        if key not in self._keys:
            name = f"{kind}{len(self._keys)}"
            self._keys[key] = z3.Function(name, *[z3.IntSort()] * len(free), z3.RealSort())
            self.reduced[name] = (kind, axes, body)
        decl = self._keys[key]
        return decl(*[self.index(n) for n in free]) if free else decl()

    def total(self, axes: frozenset, body):
        """Σ over the axes of body, in normal form: per monomial, the factors that do not
        depend on the axes out, nested sums merged in, then one sum per set of factors linked
        by the axes they share (Σ_{r,s} f(r)·g(s) = Σ_r f · Σ_s g), each axis no factor
        depends on a factor of its length."""
        out = []
        for term in _terms(z3.simplify(body, som=True)):
            inside, outside, axes_of = [], [], set(axes)
            factors = _factors(term)
            for k, f in enumerate(factors):
                nested = self.reduced.get(f.decl().name()) if z3.is_app(f) else None
                free = set().union(*(self.depends(g) for g in factors[:k] + factors[k + 1:]))
                if nested and nested[0] == "sum" and not nested[1] & (axes_of | free):
                    # merged only when no other factor has its axes free (a broadcast back)
                    axes_of |= nested[1]
                    inside += _factors(nested[2])
                elif self.depends(f) & axes_of:
                    inside.append(f)
                else:
                    outside.append(f)
            out.append(_product(outside) * self._split(frozenset(axes_of), inside))
        return z3.simplify(z3.Sum(out) if out else z3.RealVal(0))

    def _split(self, axes: frozenset, factors: list):
        """Σ over the axes of the product of the factors, one sum per linked set."""
        parts: list[tuple[set, list]] = []
        for f in factors:
            mine, rest = set(self.depends(f) & axes), []
            linked = [f]
            for part in parts:
                if part[0] & mine:
                    mine |= part[0]
                    linked += part[1]
                else:
                    rest.append(part)
            parts = [*rest, (mine, linked)]
        unused = axes - set().union(*[m for m, _ in parts])
        result = _product([self.length(a) for a in sorted(unused)])
        for mine, linked in parts:
            merged = z3.simplify(_product(linked), som=True)
            result = result * self._atom("sum", frozenset(mine), merged)
        return result

    def extreme(self, kind: str, axes: frozenset, body):
        """Max or min over the axes: the part of a sum that does not depend on them comes out."""
        terms = _terms(z3.simplify(body, som=True))
        inner = [t for t in terms if self.depends(t) & axes]
        outer = [t for t in terms if not self.depends(t) & axes]
        rest = z3.Sum(outer) if outer else z3.RealVal(0)
        if not inner:
            return z3.simplify(rest)
        return z3.simplify(self._atom(kind, axes, z3.simplify(z3.Sum(inner))) + rest)


def _terms(e) -> list:
    return list(e.children()) if z3.is_add(e) else [e]


def _factors(e) -> list:
    return list(e.children()) if z3.is_mul(e) else [e]


def _product(fs):
    out = z3.RealVal(1)
    for f in fs:
        out = out * f
    return out


def element(outputs: list[Node], generic: Generic, anyvalue=(), seeded=None) -> list[Sym]:
    """Each output at the generic element; placeholders, and the constants in `anyvalue`
    (a pattern's typed constants: any values), are functions of their indices; `seeded`
    nodes (a declared op's stand-ins) hold the terms given."""
    values: dict[Node, Sym] = {n: leaf(n, generic) for n in anyvalue}
    values.update(seeded or {})
    for node in toposort(outputs):
        if node not in values:
            values[node] = _value(node, [values[a] for a in node.args], generic)
    return [values[o] for o in outputs]


def leaf(node: Node, generic: Generic) -> Sym:
    """A placeholder (or a constant taken as any value) as a function of its indices: the
    same function for the same node (before and after share their leaves)."""
    if node not in generic.leaves:
        names = sorted(node.axes.names)
        sort = [z3.IntSort()] * len(names)
        f = z3.Function(f"in{len(generic.leaves)}", *sort, z3.RealSort())
        generic.leaves[node] = Sym(f(*[generic.index(n) for n in names]) if names else f())
    return generic.leaves[node]


def _value(node: Node, args: list[Sym], generic: Generic) -> Sym:
    if any(a.is_flattened for a in node.axes):
        raise Unsupported("a flattened axis")
    if node.op == "Constant":
        import numpy as np

        value = np.asarray(node.attrs["value"], np.float64)
        if value.size and np.all(value == value.flat[0]):
            return Sym.of(float(value.flat[0]))
        raise Unsupported("a constant of several values")
    if node.op in ("Placeholder", "Variable"):
        if node.dtype.kind != "f":
            raise Unsupported(f"{node.dtype} values")
        return leaf(node, generic)
    if node.dtype is not None and node.dtype.kind != "f" and node.op not in ENCODINGS \
            and node.op not in VIEWS:
        raise Unsupported(f"{node.op} in {node.dtype}")
    if node.op in VIEWS:
        return args[0]
    if node.op == "Reverse":
        return _reversed(node, args[0], generic)
    if node.op in REDUCTIONS:
        return _reduction(node, args, generic)
    if node.op in ENCODINGS and OPS[node.op].has("elementwise"):
        return ENCODINGS[node.op](*args, node.attrs)
    if node.op in declared.DECLARATIONS and node.outputs is None:  # through its body
        stand_ins, outputs = declared.DECLARATIONS[node.op].body(node)
        return element(list(outputs), generic, (), dict(zip(stand_ins, args)))[0]
    raise Unsupported(f"{node.op} (not by names: only views by name, elementwise ops, "
                      "Sum, Max, Min, Dot and declared ops through their bodies)")


def _reversed(node: Node, arg: Sym, generic: Generic) -> Sym:
    """x at index n - 1 - i along each reversed axis: its indices substituted. A reduced
    value inside is refused (a sum's stored body keeps the indices unsubstituted)."""
    pending, seen = [arg.v] + ([] if arg.ok is True else [arg.ok]), set()
    while pending:
        t = pending.pop()
        if t.get_id() not in seen:
            seen.add(t.get_id())
            if z3.is_app(t) and t.decl().name() in generic.reduced:
                raise Unsupported("a reduction under a Reverse")
            pending += t.children()
    for a in node.attrs["reverse_axes"]:
        generic.lengths.setdefault(a.name, z3.RealVal(a.length))
    pairs = [(generic.index(a.name), z3.ToInt(generic.length(a.name)) - 1 - generic.index(a.name))
             for a in node.attrs["reverse_axes"]]
    if not pairs:
        return arg
    ok = arg.ok if arg.ok is True else z3.substitute(arg.ok, *pairs)
    return Sym(z3.substitute(arg.v, *pairs), ok)


def _reduction(node: Node, args: list[Sym], generic: Generic) -> Sym:
    for a in (a for arg in node.args for a in arg.axes):  # an axis not a group: its own length
        generic.lengths.setdefault(a.name, z3.RealVal(a.length))
    if node.op == "Dot":
        x, y = node.args
        axes = frozenset(x.axes.names) & frozenset(y.axes.names)
        body = args[0] * args[1]
    else:
        axes, body = frozenset(node.attrs["reduction_axes"].names), args[0]
    if not (body.ok is True or z3.is_true(z3.simplify(body.ok))):
        raise Unsupported("a reduction of a term defined only somewhere")
    if not axes:
        return Sym(body.v)
    if node.op in ("Sum", "Dot"):
        return Sym(generic.total(axes, body.v))
    return Sym(generic.extreme(node.op.lower(), axes, body.v))
