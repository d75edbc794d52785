"""The graph as a pass's rules read it, by default: rules written against the model a user
sees match an import as written, with no `decompose` or `canonical_layout` in the pipeline.

An imported ONNX op is kept whole (a composite, `ir.composite`): `Mul` until something lowers
it, so `x * Sigmoid(x)` would not match. Before a pass of rules runs (when the passes run name
none of the built-in passes that lower or lay out, `DEFAULT_OFF`), each composite node whose
body has an op the pass's patterns name (`Multiply` for `x * Sigmoid(x)`; `Sum`, `Divide` for
a keep-dims `ReduceMean`; `Flatten` for a `Reshape`; not the `Broadcast` and `ReorderAxes`
every body has) is lowered into its body, unless a pattern names the composite's own op
(`LayerNormalization(x, g, b)` reads it whole). When anything was lowered, the built-in
`canonical_layout` then moves the layout views out of the elementwise ops, so the lowered
bodies read as the formula (`ReorderAxes(d * Sigmoid(d))`).

A pass in which no rule fired keeps the graph as it was: rules that match nothing change
nothing. A body no rule changed, even one a pass rebuilt on new arguments (downstream of a
fusion: `carry_rebuilt`), stays its composite: the writer writes the ONNX node back, and the
next pass finds it whole again (`composite.recompose` first), so each pass reads the ops its
own rules name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ngrules.ir import composite
from ngrules.ir.canonical import PASS_NAME as CANONICAL
from ngrules.ir.canonical import VIEWS as GLUE
from ngrules.ir.canonical import canonical_layout
from ngrules.ir.graph import Node, creation_order
from ngrules.ir.ops import OPS
from ngrules.lang.rules import Rule, RuleSet
from ngrules.lang.syntax import POp, PVar, walk

#: Built-in passes that take lowering and layout in hand: a pipeline naming one of them runs
#: exactly what it names (the shipped pipelines lower only what their rules read).
DEFAULT_OFF = (CANONICAL, composite.RECOMPOSE)


def by_default(ruleset: RuleSet, names: Sequence[str]) -> bool:
    """Whether the passes `names` leave lowering to this module (none of them decomposes,
    recomposes or lays out, unless a rules file declared a pass of that name)."""
    return not any(n not in ruleset.passes
                   and (n in DEFAULT_OFF or composite.pass_ops(n) is not False) for n in names)


def pattern_ops(rules: Iterable[Rule]) -> frozenset[str]:
    """The ops the rules' patterns name: `Op(...)`, `x: Op`, and the ops of a trait `x: t`."""
    found: set[str] = set()
    for rule in rules:
        for p in walk(rule.roots):
            if isinstance(p, POp):
                found.add(p.op)
            elif isinstance(p, PVar) and p.kind is not None:
                found.update([p.kind] if p.kind in OPS
                             else (op for op, d in OPS.items() if d.has(p.kind)))
    return frozenset(found)


def as_read(outputs: Sequence[Node], rules: Iterable[Rule]) -> list[Node]:
    """The outputs with the composites the rules read into lowered, then laid out
    canonically (the outputs themselves when there was nothing to lower)."""
    outputs = list(outputs)
    whole = composite.COMPOSITES  # empty in a process that has read no model
    if not whole:
        return outputs
    order = creation_order(outputs)
    if any(composite.recorded(n) is not None for n in order):  # an earlier pass's lowering
        outputs = composite.recompose(outputs)  # undone where no rule changed it
        order = creation_order(outputs)
    if not any(n.op in whole for n in order):
        return outputs
    named = pattern_ops(rules)
    lowered = composite.decompose(outputs, where=lambda n: _reads(n, named))
    if all(a is b for a, b in zip(lowered, outputs)):
        return outputs
    return canonical_layout(lowered)


def _reads(node: Node, named: frozenset[str]) -> Node | None:
    """node's body when a pattern reads into composite node (its body has a named op other
    than the layout glue `canonical_layout` moves, and no pattern names node's own op)."""
    if node.op in named:
        return None
    built = composite.body(node)
    return built if not (named - set(GLUE)).isdisjoint(_body_ops(built, node.args)) else None


def _body_ops(root: Node, args) -> set[str]:
    """The ops of the body under root (its arguments aside)."""
    inputs, found, stack, seen = set(args), set(), [root], set()
    while stack:
        n = stack.pop()
        if n in seen or n in inputs or not n.args:
            continue
        seen.add(n)
        found.add(n.op)
        stack.extend(n.args)
    return found


def applied(one, outputs: Sequence[Node], rules: Iterable[Rule], trace: list) -> list[Node]:
    """The pass `one` (its `apply`, its `memo` of images) applied to the graph as `rules`
    read it; the graph as it was when no rule fired (`trace` grew by nothing) on a graph this
    module changed. A body the pass only rebuilt on new arguments stays its composite."""
    rules = tuple(rules)
    fired, read = len(trace), as_read(outputs, rules)
    done = one.apply(read)
    if all(a is b for a, b in zip(read, outputs)):
        return done
    if len(trace) == fired:
        return list(outputs)
    carry_rebuilt(read, one.memo.get)
    return done


#: The most nodes of one body `carry_rebuilt` compares.
BODY_LIMIT = 512


def carry_rebuilt(outputs: Sequence[Node], image: Callable[[Node], Node | None]) -> None:
    """For each body root `decompose` recorded in the graph of `outputs`: when a pass only
    rebuilt it and every node of its body on their arguments' images (no rule fired inside),
    record the root's image as its composite on the images of its arguments, so the writer
    writes the ONNX op back (values are the same: a pass changes none)."""
    for root in creation_order(outputs):
        whole = composite.recorded(root)
        new = image(root) if whole is not None else None
        if new is None or new is root or composite.recorded(new) is not None:
            continue
        args = tuple(image(a) for a in whole.args)
        if None not in args and _rebuilt_only(root, set(whole.args), image):
            composite.record(new, whole.with_args(args))


def _rebuilt_only(root: Node, stop: set[Node], image) -> bool:
    """Whether each node from root down to `stop` has as image itself on its args' images."""
    stack, seen = [root], set()
    while stack:
        m = stack.pop()
        if m in seen or m in stop or not m.args:
            continue
        seen.add(m)
        args = tuple(image(a) for a in m.args)
        if len(seen) > BODY_LIMIT or None in args or image(m) is not m.with_args(args):
            return False
        stack.extend(m.args)
    return True
