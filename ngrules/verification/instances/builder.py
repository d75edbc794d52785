"""The builder: one instance of a rule's patterns, built top-down."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st

from ngrules.errors import NgrulesError
from ngrules.ir.axes import Axes
from ngrules.ir.graph import Node, make_node
from ngrules.ir.ops import OPS
from ngrules.lang.syntax import PLit, PNamed, POp, PVar
from ngrules.verification.instances.choices import (
    AXIS_NAMES,
    MAX_RANK,
    NEGATE,
    VALUES,
    Reject,
    lengths_for,
    maybe_regroup,
    regroup,
    same_axes,
)
from ngrules.verification.instances.classes import Constraints, constraints, fixed_by_guards
from ngrules.verification.instances.declared import inline
from ngrules.verification.instances.domains import Domain, argument_domain, domain_values, strictest
from ngrules.verification.instances.generic import arg_dtypes, layout, open_scalar_attrs
from ngrules.verification.instances.hints import Hints
from ngrules.verification.instances.plans import NEEDS_AN_AXIS, op_at, pattern_rank, plan_for


# -- the builder --------------------------------------------------------------------------------
class Builder:
    """Builds one instance of patterns top-down; `bound` maps pattern names to their nodes.

    Given the rule's `roots`, positions the op table or the guards make equal in axes share a
    class (`constraints`); the first axes chosen for a class are `decided` for all of it, so a
    named node built at its first use already has the axes its later uses need."""

    def __init__(self, draw, dtype=np.float64, hints: Hints | None = None, roots=(),
                 cons: Constraints | None = None, fixed: dict[int, dict] | None = None):
        self.draw = draw
        self.dtype = np.dtype(dtype)
        self.hints = hints or Hints()
        self.cons = cons if cons is not None else constraints(roots, self.hints)
        self.decided: dict[object, Axes] = {}
        self.bound: dict[str, Node] = {}
        self.domains: dict[Node, Domain] = {}
        self._axis_names = iter(AXIS_NAMES)
        self._leaf_names = itertools.count()
        self.arg_dtypes: dict[str, list] = {}  # op -> its arguments' dtypes (generic.arg_dtypes)
        self._leaf_dtype = None  # the dtype the next placeholder must have (None: self.dtype)
        #: whether domains pass through sign-keeping ops (half the instances: the other half
        #: sees each op's own domain only, so values outside a composite's domain are tried)
        self.push = bool(draw(st.booleans()))
        #: attributes fixed per op pattern (by id): by guards (`c.position == 0`), by declared
        #: ops' bodies; `fixing` holds those of the op whose plan runs (plans solve with them)
        self.fixed: dict[int, dict] = dict(fixed) if fixed is not None else fixed_by_guards(
            roots, self.hints)
        self.fixing: dict = {}

    # -- axes and leaves ------------------------------------------------------------------------
    def fresh(self, n: int) -> Axes:
        """n new axes of random lengths (1-5; shorter for many axes)."""
        from ngrules.ir.axes import Axis

        names = [next(self._axis_names, None) for _ in range(n)]
        if None in names:
            raise Reject("the instance needs more axes than there are names")
        lengths = lengths_for(n)
        return Axes(Axis(name, self.draw(lengths)) for name in names)

    def free_axes(self, at=None, lo: int = 0) -> Axes:
        """Axes for a node nothing above constrains: the rank its guards ask, else 0-5,
        sometimes with flattened axes."""
        low, high = self.cons.ranks.get(self.cons.of(at), (0, MAX_RANK))
        low, high = max(low, lo), min(high, max(low, lo) + MAX_RANK)
        if low > high:
            raise Reject(f"the guards ask {getattr(at, 'name', '_')!r} for no possible rank")
        axes = self.fresh(self.draw(st.integers(low, high)))
        return axes if self.cons.ranks.get(self.cons.of(at)) else maybe_regroup(self.draw, axes)

    def free_want(self, op: str, at=None) -> Axes:
        """Output axes for an unconstrained op node (Flatten's output is really flattened)."""
        if op == "Flatten":
            return regroup(self.draw, self.free_axes(at, lo=1))
        axes = self.free_axes(at, lo=1 if op in NEEDS_AN_AXIS else 0)
        if op == "Unflatten" and not any(a.is_flattened for a in axes) and len(axes) >= 2 \
                and not self.cons.ranks.get(self.cons.of(at)) and self.draw(st.booleans()):
            return regroup(self.draw, axes)  # half the time an input flattened already: an
        return axes  # unguarded Unflatten(Flatten(x)) => x is caught by a count, not luck

    def placeholder(self, axes: Axes, domain: Domain, name: str = "_") -> Node:
        label = name if name != "_" else f"_{next(self._leaf_names)}"
        dtype, self._leaf_dtype = self._leaf_dtype or self.dtype, None
        node = make_node("Placeholder", name=label, axes=axes, dtype=dtype)
        self.domains[node] = strictest(self.domains.get(node, "real"), domain)
        return node

    def scalar_value(self, domain: Domain) -> float:
        """A readable value in the domain: a small count (as a mean's divisor) or a fraction."""
        value = self.draw(VALUES)
        return -value if domain == "real" and self.draw(NEGATE) else value

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
        dtype, self._leaf_dtype = self._leaf_dtype, None
        if dtype is not None and dtype.kind in "iu":  # where the op takes integers (a start)
            value = self.draw(st.integers(-2, 4))
            return make_node("Constant", value=np.full(axes.lengths, value, dtype), axes=axes)
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
            axes = self.free_want(op_at(p), p)
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
        node = self._cast_as_asked(p.name, self.build(p.pattern, want, domain), want)
        self.bound[p.name] = node
        return node

    def _cast_as_asked(self, name: str, node: Node, want: Axes | None) -> Node:
        """The node with the dtype attribute a guard asks of it (`h.dtype == "float16"` for
        `h @ Cast(x)`); the node itself when none does. Its users are not built yet."""
        cast = self.hints.casts.get(name)
        if cast is None or node.attrs.get("dtype") == cast:
            return node
        return self.make(node.op, node.args, {**node.attrs, "dtype": cast}, want)

    def _var(self, p: PVar, want: Axes | None, domain: Domain) -> Node:
        if p.name in self.bound:
            return self._reuse(p.name, want, domain)
        node = self._cast_as_asked(p.name, self._typed(p, want, domain), want)
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
        self._leaf_dtype = None  # an op's own leaves are of the instance's dtype
        if op == "Output":
            return self._output(args, want, domain)
        if opdef.has("fused") and not opdef.has("elementwise"):
            built = self._declared(op, args, want, domain)
            if built is not None:
                return built
        if want is None and (rank := pattern_rank(at if at is not None else POp(op, args or ()))):
            want = self.fresh(rank)
        plan = plan_for(op)
        if plan is None:
            return self._generic(op, args, want, domain)
        args = args if args is not None else (PVar("_"),) * (opdef.arity or 2)
        first: dict[int, Node] = {}
        if want is None and opdef.has("elementwise"):
            first = self._generic_operand_first(op, args, domain)
            want = next((n.axes for n in first.values()), None)
        want = want if want is not None else self.free_want(op, at)
        self.decide(at, want)
        fixed = self._fixed_for(op, at)
        self.fixing = fixed
        try:
            arg_axes, attrs = plan(self, want, [self.known(a) for a in args])
        finally:
            self.fixing = {}
        attrs = {**open_scalar_attrs(self, op, attrs), **fixed}
        for a, ax in zip(args, arg_axes):
            self.decide(a, ax)
        dtypes = arg_dtypes(self, op)
        nodes = [
            first[i] if i in first else
            self.build_arg(a, ax, argument_domain(op, i, domain, self.push), dtypes, i)
            for i, (a, ax) in enumerate(zip(args, arg_axes))
        ]
        if opdef.has("commutative") and len(nodes) == 2 and self.draw(st.booleans()):
            nodes.reverse()
        return self.make(op, nodes, attrs, want)

    def _fixed_for(self, op: str, at) -> dict:
        names = {a.name for a in OPS[op].attrs}
        return {k: v for k, v in self.fixed.get(id(at), {}).items() if k in names}

    def _declared(self, op: str, args, want: Axes | None, domain: Domain) -> Node | None:
        """A declared op built through its body (see `declared`); None if it cannot be."""
        body = inline(op, args if args is not None else (PVar("_"),) * (OPS[op].arity or 1))
        if body is None:
            return None
        self.fixed.update(body.fixed)
        self.build(body.root, want, domain)
        nodes = [self.bound[n] for n in body.args]
        attrs = {key: self.bound[n].attrs[a] for key, (n, a) in body.reads.items()
                 if n in self.bound and a in self.bound[n].attrs}
        return self.make(op, nodes, attrs, want)

    def _generic_operand_first(self, op: str, args, domain: Domain) -> dict[int, Node]:
        """Under an elementwise op whose axes nothing fixes, an operand built from its op's
        generator (a convolution, a pooling: ops whose output lengths they compute) is built
        first, and its axes become the elementwise op's."""
        for i, a in enumerate(args):
            inner = a.pattern if isinstance(a, PNamed) else a
            if (
                isinstance(inner, POp) and not inner.optional and plan_for(inner.op) is None
                and not OPS[inner.op].has("leaf") and inner.op != "Output"
                and self.cons.of(a) not in self.cons.ranks
            ):
                dtypes = arg_dtypes(self, op)
                node = self.build_arg(a, None, argument_domain(op, i, domain, self.push), dtypes, i)
                return {i: node} if node.outputs is None else {}
        return {}

    def _leaf(self, op: str, want: Axes | None, domain: Domain, at) -> Node:
        axes = want if want is not None else self.free_axes(at)
        if op == "Constant":
            return self.constant(axes, domain, at)
        if op == "Variable":
            label = f"v{next(self._leaf_names)}"
            initial = self.scalar_value(domain)
            return make_node("Variable", name=label, axes=axes, dtype=self.dtype, initial=initial)
        return self.placeholder(axes, domain, getattr(at, "name", "_"))

    def build_arg(self, p, axes: Axes | None, domain: Domain, dtypes: list, i: int) -> Node:
        """Argument i of an op: a placeholder there takes the dtype the op's generator gave
        that argument (a bool condition, integer indices) when it is not a float."""
        self._leaf_dtype = dtypes[i] if i < len(dtypes) else None
        try:
            return self.build(p, axes, domain)
        finally:
            self._leaf_dtype = None

    def _output(self, args, want: Axes | None, domain: Domain) -> Node:
        inner = args[0] if args else PVar("_", "multi_output")
        op = self._multi_output_op(inner)
        if want is not None and op is not None:
            node, index = self._generic(op, getattr(inner, "args", None), want, domain, True)
            if isinstance(inner, PVar) and inner.name != "_":
                self.bound.setdefault(inner.name, node)
            return self.make("Output", [node], {"index": index}, want)
        node = self.build(inner, None, domain)
        if node.outputs is None:
            raise Reject(f"Output needs a multi-output node, got {node.op}")
        fits = [i for i, (ax, _) in enumerate(node.outputs) if want is None or same_axes(ax, want)]
        if not fits:
            raise Reject(f"no output of {node.op} has axes {want!r}")
        return self.make("Output", [node], {"index": self.draw(st.sampled_from(fits))}, want)

    def _multi_output_op(self, p) -> str | None:
        """The multi-output op an Output's argument pattern stands for (drawn for a trait)."""
        if isinstance(p, POp) and not p.optional:
            return p.op
        if isinstance(p, PVar) and p.name not in self.bound and p.kind is not None:
            if p.kind in OPS:
                return p.kind
            ops = sorted(o for o in OPS if p.kind in OPS[o].traits and OPS[o].has("multi_output"))
            return self.draw(st.sampled_from(ops)) if ops else None
        return None

    def _generic(self, op: str, args, want: Axes | None, domain: Domain, multi: bool = False):
        """An op without a plan: a renamed sample of its generator gives the layout, the
        attributes and the arguments' dtypes, the pattern the arguments (see `generic`). With
        `multi`, (the multi-output node, the index of its output with axes want)."""
        n_args = len(args) if args is not None else None
        lay = layout(self, op, want, n_args)
        args = args if args is not None else (PVar("_"),) * len(lay.arg_axes)
        nodes = [
            self.build_arg(p, ax, argument_domain(op, i, domain, self.push), lay.dtypes, i)
            for i, (p, ax) in enumerate(zip(args, lay.arg_axes))
        ]
        if multi:
            return self.make(op, nodes, lay.attrs, None), lay.index
        return self.make(op, nodes, lay.attrs, want)
