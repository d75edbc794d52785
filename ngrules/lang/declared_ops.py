"""`op Name(params) = body` declarations -> ops in the op table.

A declared op gets everything from its body, a replacement expression over its parameters:
axes inference (the body built on stand-in placeholders), a reference kernel (the body graph
compiled by the executor), its gradient (reverse-mode autodiff of the body, then the stand-ins
replaced by the real arguments), the domain of each argument (from the ops that read it) and a
generator of instances. A body made only of elementwise ops makes an elementwise op, so the
matcher, the instance builder and `apply_op`'s broadcasting treat it like `Tanh` or `Add`.
These are closures registered into the IR's table: the IR calls them without importing this
layer. A fast kernel registered with `register_kernel` replaces the reference at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ngrules.errors import NgrulesError, OpError, RuleError
from ngrules.ir import declared
from ngrules.ir.graph import Node, make_node, toposort
from ngrules.ir.ops import ATTR_KINDS, OPS, REQUIRED, AttrSpec, register_op
from ngrules.lang.bounds import shown
from ngrules.lang.checker import Problems, check_expression
from ngrules.lang.expr import evaluate
from ngrules.lang.formatter import format_op
from ngrules.lang.syntax import ECall, EVar, OpDecl, OpParam, RulesFile, name_span, walk

#: Strictness of argument domains: the strictest of the ops reading an argument wins.
_STRICT = {"real": 0, "nonzero": 1, "positive": 2, "bool": 3}
_KIND_OF_DEFAULT = {int: "int", float: "float", str: "str"}
#: The declarations of the ops registered from rules files, by name: the instance builder
#: builds a declared op's arguments through its body (verification/instances/declared.py).
DECLS: dict[str, OpDecl] = {}


class Body:
    """The body of one declared op, built on whatever argument nodes it is given."""

    def __init__(self, decl: OpDecl):
        self.decl = decl
        self.tensors = [p.name for p in decl.params if not p.is_attribute]

    def build(self, args: Sequence[Node], attrs) -> tuple[Node, ...]:
        env = {**dict(attrs), **dict(zip(self.tensors, args))}
        outputs = []
        for expr in self.decl.body:
            try:
                value = evaluate(expr, env)
            except NgrulesError as e:
                raise OpError(f"{self.decl.name}: {e.message}", e.span) from None
            if not isinstance(value, Node) or value.outputs is not None:
                raise OpError(
                    f"{self.decl.name}: the body must give one tensor per output, "
                    f"got {shown(value)}",
                    expr.span,
                )
            outputs.append(value)
        return tuple(outputs)

    def stand_ins(self, types) -> list[Node]:
        """A placeholder per tensor parameter, of the given (axes, dtype) types."""
        return [
            make_node("Placeholder", name=f"{self.decl.name}.{p}", axes=axes, dtype=dtype)
            for p, (axes, dtype) in zip(self.tensors, types)
        ]

    def on_stand_ins(self, args: Sequence[Node], attrs) -> tuple[list[Node], tuple[Node, ...]]:
        stand_ins = self.stand_ins([(a.axes, a.dtype) for a in args])
        return stand_ins, self.build(stand_ins, attrs)


# -- the op table's fields, from the body -------------------------------------------------------
def _infer(body: Body):
    single = len(body.decl.body) == 1

    def infer(args, attrs):
        _, outputs = body.on_stand_ins(args, attrs)
        types = tuple((o.axes, o.dtype) for o in outputs)
        return types[0] if single else types

    return infer


def _reference(body: Body):
    """node -> the function of arrays that runs the body graph (compiled once per node)."""
    from ngrules.ir.executor import Program

    def kernel(node):
        stand_ins, outputs = body.on_stand_ins(node.args, node.attrs)
        program = Program(outputs)
        read = [s in program.placeholders for s in stand_ins]  # a parameter may go unused

        def run(*arrays):
            values = program.run({s: a for s, a, r in zip(stand_ins, arrays, read) if r})
            return values[0] if len(values) == 1 else tuple(values)

        return run

    return kernel


def _grad(body: Body):
    """Adjoints of the arguments: autodiff of sum(output * delta) through the body."""
    from ngrules.ir.autodiff import adjoints_through

    single = len(body.decl.body) == 1

    def grad(node, delta):
        deltas = (delta,) if single else tuple(delta)
        stand_ins, outputs = body.on_stand_ins(node.args, node.attrs)
        return adjoints_through(stand_ins, outputs, node.args, deltas, body.decl.name)

    return grad


def _gen(body: Body, attrs: tuple[AttrSpec, ...]):
    """Instances: every tensor argument on one random set of axes; attributes at their
    default, or drawn (a few numbers; a non-empty subset of the axes for an `axes` kind).
    A draw the body cannot build on is rejected, as hypothesis's `assume` would."""
    from ngrules.ir import opgen
    from ngrules.ir.axes import Axes

    name = body.decl.name
    samples = {"float": (0.5, 1.5), "int": (1, 2, 3)}
    needs_axes = any(a.required and a.kind in ("axes", "axis") for a in attrs)

    @opgen.leaf_args
    def gen(draw, leaf):
        from hypothesis import reject
        from hypothesis import strategies as st

        axes = opgen.some_axes(draw, opgen.axis_pool(draw), min_size=int(needs_axes))
        values = {}
        for a in (a for a in attrs if a.required):
            if a.kind in samples:
                values[a.name] = draw(st.sampled_from(samples[a.kind]))
            elif a.kind == "axes":
                values[a.name] = Axes([ax for ax in axes if draw(st.booleans())] or axes[:1])
            elif a.kind == "axis":
                values[a.name] = draw(st.sampled_from(list(axes)))
            else:
                reject()
        try:
            return make_node(name, tuple(leaf(axes) for _ in body.tensors), **values)
        except OpError:
            reject()

    return gen


def _sample(body: Body, attrs: tuple[AttrSpec, ...]):
    """The body on stand-ins of one shared set of axes, or None when it does not build so."""
    from ngrules.ir.axes import make_axes

    types = [(make_axes({"A": 2, "B": 3}), np.dtype(np.float64))] * len(body.tensors)
    values = {a.name: a.default if not a.required else {"float": 1.0, "int": 1}.get(a.kind)
              for a in attrs}
    stand_ins = body.stand_ins(types)
    try:
        return stand_ins, body.build(stand_ins, values)
    except NgrulesError:
        return stand_ins, None


def _traits_and_domain(body: Body, attrs) -> tuple[set[str], tuple[str, ...]]:
    """`elementwise` when every node that reads an argument is elementwise and the outputs
    keep the arguments' axes; each argument's domain from the ops that read it."""
    traits = {"fused"} | ({"multi_output"} if len(body.decl.body) > 1 else set())
    stand_ins, outputs = _sample(body, attrs)
    if outputs is None or not stand_ins:
        return traits, ("real",)
    domains = dict.fromkeys(stand_ins, "real")
    depends, pointwise = set(stand_ins), True
    for node in toposort(outputs):
        if any(a in depends for a in node.args):
            depends.add(node)
            pointwise = pointwise and OPS[node.op].has("elementwise")
        for i, a in enumerate(node.args):
            if a in domains:
                own = OPS[node.op].arg_domain(i)
                domains[a] = max(domains[a], own, key=_STRICT.__getitem__)
    same = all(o.axes == stand_ins[0].axes for o in outputs)
    if pointwise and same and len(outputs) == 1:
        traits.add("elementwise")
    return traits, tuple(domains[s] for s in stand_ins)


# -- checking and registering declarations -----------------------------------------------------
@dataclass
class Declarations:
    """The ops a load declared: `names` in order, `added` those new to the table."""

    names: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    decls: dict[str, OpDecl] = field(default_factory=dict)

    def rollback(self) -> None:
        """Take the new ops out of the table again (the load failed)."""
        for name in self.added:
            declared.forget(name)
        self.added.clear()


#: Every op declared so far in this process, by name: a second load of one file reuses it.
DECLARED: dict[str, OpDecl] = {}


def declare_ops(files: Sequence[RulesFile], errors: list[RuleError]) -> Declarations:
    """Check and register every `op` declaration of files (in load order); problems are
    appended to errors, and a declaration with problems registers nothing."""
    result = Declarations()
    for f in files:
        for d in f.decls:
            if isinstance(d, OpDecl):
                problems = Problems()
                _declare(d, problems, result)
                errors.extend(problems.errors)
    return result


def _declare(d: OpDecl, problems: Problems, result: Declarations) -> None:
    where = d.name_span or d.span
    previous = DECLARED.get(d.name)
    if d.name in result.decls:
        first = result.decls[d.name].span
        problems.add(f"op {d.name!r} is declared twice (first at {first})", where)
        return
    if previous is not None and d.name in declared.REFERENCE:
        if previous != d:
            problems.add(
                f"op {d.name!r} is already declared differently (at {previous.span})", where
            )
            return
        result.names.append(d.name)
        result.decls[d.name] = d
        return
    if d.name in OPS:
        problems.add(f"op {d.name!r} already exists (a built-in or Python-registered op)", where)
        return
    if not d.name.isidentifier() or not d.name[0].isupper():
        problems.add(f"op name {d.name!r} must start with a capital letter", where)
        return
    attrs = _check_params(d, problems)
    env = {p.name for p in d.params}
    for expr in d.body:
        check_expression(expr, env, problems)
    if d.onnx is not None:
        _check_onnx(d, problems)
    if problems.errors:
        return
    text = format_op(d)  # the op's doc and source: formatted once
    _register(d, attrs, problems, text)
    if not problems.errors:
        DECLARED[d.name] = d
        declared.SOURCE[d.name] = text
        declared.USES[d.name] = tuple(dict.fromkeys(
            e.func for e in walk(d.body) if isinstance(e, ECall) and e.func in declared.REFERENCE
            and e.func != d.name))
        result.names.append(d.name)
        result.added.append(d.name)
        result.decls[d.name] = d


def _check_onnx(d: OpDecl, problems: Problems) -> None:
    """`onnx Op(attr=expr)`: a capitalised op name, each attribute once, each an expression
    over the declared op's attributes only (an ONNX attribute is fixed per node)."""
    target = d.onnx
    if not target.op[:1].isupper():
        problems.add(f"ONNX op name {target.op!r} must start with a capital letter", target.span)
    attributes = {p.name for p in d.params if p.is_attribute}
    seen: set[str] = set()
    for name, expr in target.attrs:
        if name in seen:
            problems.add(f"ONNX attribute {name!r} is given twice", expr.span or target.span)
        seen.add(name)
        tensors = sorted(n for n in _variables(expr) if n not in attributes
                         and any(p.name == n for p in d.params))
        if tensors:
            problems.add(
                f"ONNX attribute {name!r} reads tensor parameter {tensors[0]!r}: an attribute "
                f"may read only the op's attributes ({', '.join(sorted(attributes)) or 'none'})",
                expr.span or target.span,
            )
            continue
        check_expression(expr, attributes, problems)


def _variables(expr) -> set[str]:
    return {e.name for e in walk([expr]) if isinstance(e, EVar)}


def _check_params(d: OpDecl, problems: Problems) -> tuple[AttrSpec, ...]:
    seen: set[str] = set()
    attrs = []
    for p in d.params:
        if p.name in seen:
            problems.add(f"parameter {p.name!r} appears twice", p.span)
        seen.add(p.name)
        if p.is_attribute:
            spec = _attribute(d, p, problems)
            if spec is not None:
                attrs.append(spec)
        elif attrs:
            problems.add(
                f"tensor parameter {p.name!r} follows an attribute; list tensors first", p.span
            )
    if not any(not p.is_attribute for p in d.params):
        problems.add(f"op {d.name!r} needs at least one tensor parameter", d.name_span)
    return tuple(attrs)


def _attribute(d: OpDecl, p: OpParam, problems: Problems) -> AttrSpec | None:
    default, kind = None, p.kind
    if p.default is not None:
        try:
            default = evaluate(p.default, {})
        except NgrulesError as e:
            problems.add(f"the default of {p.name!r} must be a constant: {e.message}", p.span)
            return None
        kind = kind or _KIND_OF_DEFAULT.get(type(default))
        if kind == "float" and isinstance(default, int) and not isinstance(default, bool):
            default = float(default)
    if kind not in ATTR_KINDS:
        what = f"kind {kind!r}" if kind else f"a default of type {type(default).__name__}"
        problems.add(
            f"attribute {p.name!r} has {what}; kinds: {', '.join(sorted(ATTR_KINDS))}",
            name_span(p.span, p.name),
        )
        return None
    return AttrSpec(p.name, kind, REQUIRED if p.default is None else default)


def _register(d: OpDecl, attrs: tuple[AttrSpec, ...], problems: Problems, text: str) -> None:
    body = Body(d)
    traits, domain = _traits_and_domain(body, attrs)
    reference = _reference(body)
    declared.REFERENCE[d.name] = reference
    try:
        register_op(
            d.name,
            arity=len(body.tensors),
            attrs=attrs,
            infer=_infer(body),
            kernel=declared.kernel_for(d.name, reference),
            grad=_grad(body),
            gen=_gen(body, attrs),
            traits=traits,
            domain=domain,
            outputs=len(d.body),
            doc=text,
        )
    except OpError as e:
        declared.REFERENCE.pop(d.name, None)
        problems.add(e.message, d.name_span)
        return
    DECLS[d.name] = d
    source = d.span.file if d.span is not None else ""
    declared.DECLARATIONS[d.name] = declared.Declaration(
        lambda node: body.on_stand_ins(node.args, node.attrs), source, _onnx_op(d.onnx)
    )


def _onnx_op(target) -> declared.OnnxOp | None:
    """The named ONNX op, its attributes evaluated on each node's attributes."""
    if target is None:
        return None

    def attributes(attrs) -> dict:
        return {name: evaluate(expr, dict(attrs)) for name, expr in target.attrs}

    return declared.OnnxOp(target.op, target.domain, attributes)
