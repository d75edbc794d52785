"""A rule compiled for the engine: matchers for its roots, then its clauses and replacement.

`CompiledRule.apply(node, ctx)` matches the first root at node (and any further roots among
the users of nodes already bound), evaluates lets and guards in source order (a false guard
backtracks into the matcher for another way to match), builds the replacement and checks its
axes against each root. It returns `(roots, replacements, nodes it created)` or None.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ngrules.engine.fused import clause_function, clause_lines
from ngrules.engine.match import compile_pattern
from ngrules.engine.matchgen import WRONG_TYPE, compile_fused, compile_returning, names_in
from ngrules.engine.pending import NONE_PENDING, Pending
from ngrules.engine.semantics import same_type
from ngrules.errors import NgrulesError, RuleError
from ngrules.ir import graph
from ngrules.ir.frontend import constant
from ngrules.ir.graph import Node, make_node
from ngrules.ir.ops import OPS
from ngrules.lang.bounds import shown
from ngrules.lang.expr import NotBoolean, compile_expr, guard_truth
from ngrules.lang.exprgen import compile_clauses, generate_body
from ngrules.lang.replacements import bound_names
from ngrules.lang.rules import Rule
from ngrules.lang.syntax import EAttr, ECall, EVar, Guard, Let, PNamed, POp, PVar, walk

#: The bindings keys under which a one-root rule's root and the walk's pending nodes reach its
#: continuation (keys no name has).
_ROOT, _PENDING = object(), object()


@dataclass
class RuleStats:
    """How often a rule was tried at a node, matched, failed to evaluate, and the time spent."""

    attempts: int = 0
    matches: int = 0
    seconds: float = 0.0
    failures: int = 0  # matches rejected because a guard, let or replacement failed to evaluate
    first_failure: RuleError | None = None


#: What the clauses may read of a pending node (its type, which rebuilding keeps).
_TYPE_ATTRIBUTES = frozenset({"axes", "dtype", "rank", "op", "shape"})


def needs_nodes(rule: Rule) -> tuple[str, ...]:
    """The pattern names the clauses or the replacement use as nodes, not only for their type
    (`x.axes`, `size(x)`): a pending node bound to one of them is rebuilt first."""
    exprs = [c.expr for c in rule.clauses if isinstance(c, (Guard, Let))] + list(rule.replacement)
    typed: set[int] = set()
    for e in walk(exprs):
        if isinstance(e, EAttr) and isinstance(e.obj, EVar) and e.name in _TYPE_ATTRIBUTES:
            typed.add(id(e.obj))
        elif isinstance(e, ECall) and e.func == "size" and len(e.args) == 1 and not e.kwargs:
            typed.add(id(e.args[0]))  # an id that is no variable's is never looked up
    used = {e.name for e in walk(exprs) if isinstance(e, EVar) and id(e) not in typed}
    return tuple(sorted(used & bound_names(rule.roots)))


def inner_ops(pattern) -> set[str]:
    """The ops of the pattern's nodes below its root: what a match can fuse away."""
    while isinstance(pattern, PNamed):
        pattern = pattern.pattern
    below = pattern.args if isinstance(pattern, POp) else ()
    return {p.op for p in walk(below) if isinstance(p, POp)}


def root_ops(pattern) -> frozenset[str] | None:
    """The ops a node must have for the pattern to match at it (None: any op)."""
    if isinstance(pattern, PNamed):
        return root_ops(pattern.pattern)
    if isinstance(pattern, POp):
        if not pattern.optional:
            return frozenset({pattern.op})
        inner = root_ops(pattern.args[0])
        return None if inner is None else inner | {pattern.op}
    if isinstance(pattern, PVar) and pattern.kind is not None:
        return frozenset({pattern.kind}) if pattern.kind in OPS else None
    return None


def required_ops(rule: Rule) -> frozenset[str]:
    """The ops every match of the rule binds a node of: each op its patterns name but an
    optional wrapper's (`Op?(p)` may match p alone; p's ops count), and each `x: Op`'s
    (matching compares ops by name: see `presence`)."""
    found: set[str] = set()
    stack = list(rule.roots)
    while stack:
        p = stack.pop()
        if isinstance(p, PNamed):
            stack.append(p.pattern)
        elif isinstance(p, POp):
            if not p.optional:
                found.add(p.op)
            stack.extend(p.args)
        elif isinstance(p, PVar) and p.kind is not None and p.kind in OPS:
            found.add(p.kind)
    return frozenset(found)


def _anchor(pattern, bound: set[str], depth: int = 0) -> tuple[str, int] | None:
    """A name bound by earlier roots, and how many levels below this pattern's root it sits."""
    if isinstance(pattern, (PVar, PNamed)) and pattern.name in bound:
        return pattern.name, depth
    if isinstance(pattern, PNamed):
        return _anchor(pattern.pattern, bound, depth)
    if isinstance(pattern, POp):
        step = 0 if pattern.optional else 1
        for a in pattern.args:
            found = _anchor(a, bound, depth + step)
            if found is not None:
                return found
    return None


class CompiledRule:
    """A rule ready to apply; its `stats` accumulate over a rewrite."""

    def __init__(self, rule: Rule):
        self.rule = rule
        self.name = rule.name
        self.root_ops = root_ops(rule.roots[0])
        self.is_multi_root = len(rule.roots) > 1
        self.stats = RuleStats()
        self._exprs: dict[int, object] = {}
        self._finish_single = self._finish_single  # bind once: it runs at every match
        only = rule.replacement[0] if len(rule.replacement) == 1 else None
        plain = isinstance(only, EVar) and not rule.clauses and not self.is_multi_root
        #: For `=> x` with no clauses: a matcher that returns x itself (no bindings dict, no
        #: continuation), or WRONG_TYPE when x cannot stand in for the root (then `apply`
        #: raises the located error).
        self.returning = compile_returning(rule.roots[0], only.name) if plain else None
        self.builds = not isinstance(only, EVar)  # its replacement is not just a bound node

    # What a walk's generated dispatch does not use (it pastes a rule's matcher and clauses
    # into its own code) is generated at its first use: most compiled rules never need it.
    @cached_property
    def location(self) -> str:
        return self.rule.location

    @cached_property
    def needs(self) -> frozenset[str]:
        """The ops every match binds a node of (`presence`)."""
        return required_ops(self.rule)

    @cached_property
    def _needs_nodes(self) -> tuple[str, ...]:
        return needs_nodes(self.rule)

    @cached_property
    def matchers(self) -> list:
        """One matcher per root (see `_compile_roots`)."""
        return self._roots[0]

    @cached_property
    def anchors(self) -> list:
        """For each later root, the bound name (and its depth) its candidates come from."""
        return self._roots[1]

    @cached_property
    def _roots(self) -> tuple[list, list]:
        return self._compile_roots()

    @cached_property
    def _match(self):
        return self.matchers[0]

    @cached_property
    def _generated(self):
        """The generated clauses and replacement, `run(b)`; else the interpreter."""
        return compile_clauses(self.rule.clauses, self.rule.replacement) or self._interpret

    @cached_property
    def fusable(self) -> bool:
        """Whether `fused` is a matcher (decided without generating it): a one-root rule, not
        `=> x`, whose clauses generate reading the pattern's names from locals."""
        if self.is_multi_root or self.returning is not None:
            return False
        params = {name: f"p{i}" for i, name in enumerate(sorted(names_in(self.rule.roots[0])))}
        try:
            generate_body(self.rule.clauses, self.rule.replacement, params)
        except (KeyError, TypeError):
            return False
        return True

    @cached_property
    def fused(self):
        """For a one-root rule with generated clauses (not `=> x`): a matcher,
        `fused(node, None, None, V)`, that evaluates them at each match itself and returns
        what `apply` would (see `fused`); None otherwise."""
        return self._fuse() if self.fusable else None

    def _fuse(self):
        match, names = compile_fused(self.rule.roots[0])
        clauses = clause_function(self, names, _ROOT, _PENDING)
        if clauses is None:
            return None
        match.__globals__["_CL"] = clauses
        return match

    def clause_lines(self, bound: dict[str, str], prefix: str) -> tuple[list[str], dict]:
        """The clauses of a fused rule as lines to paste into its matcher (`fused`)."""
        return clause_lines(self, bound, prefix, _ROOT, _PENDING)

    @property
    def returns_a_binding(self) -> bool:
        """`=> x` with no clauses: builds no node, so a new root need not be interned."""
        return self.returning is not None

    def _compile_roots(self):
        """One matcher per root, each seeing the names earlier roots bound, and for each later
        root the bound name (and its depth) from which to search for its candidates."""
        bound: set[str] = set()
        matchers, anchors = [], []
        for root in self.rule.roots:
            matchers.append(compile_pattern(root, frozenset(bound)))
            anchors.append(_anchor(root, bound))
            bound |= bound_names([root])
        return matchers, anchors

    # -- matching --------------------------------------------------------------------------
    def apply(self, node: Node, ctx: Any = None, pending: Pending = NONE_PENDING):
        """(roots, replacements, new nodes) for the first way the rule matches at node, or None.
        With `pending` (a one-root rule in a walk), node and the nodes under it may be pending:
        matched through their views; the bindings the clauses need as nodes are rebuilt."""
        if self.is_multi_root:
            return self._match(node, {}, self._after_root(1, (node,), ctx))
        if self.returning is not None:  # `=> x`: no bindings, no continuation
            value = self.returning(node, None, None, pending)
            if value is None:
                return None
            if value is not WRONG_TYPE:
                return (node,), (pending.force(value) if pending else value,), ()
        return self._match(node, {_ROOT: node, _PENDING: pending}, self._finish_single, pending)

    def _finish_single(self, b: dict):
        """The continuation of a one-root rule. The bindings the clauses use as nodes are
        rebuilt if pending (those used only for their type, as in `x.axes` or `size(x)`, may
        stay pending)."""
        pending = b[_PENDING]
        if pending:
            for needed in self._needs_nodes:
                b[needed] = pending.force(b[needed])
        return self._finish(b, (b[_ROOT],))

    def _after_root(self, i: int, roots: tuple[Node, ...], ctx):
        if i == len(self.matchers):

            def finish(b):
                if not ctx.free(roots, b):  # overlaps a match already taken this round
                    return None
                found = self._finish(b, roots)
                if found is not None:
                    ctx.take(roots, b)
                return found

            return finish

        def next_root(b):
            for candidate in ctx.candidates(self.anchors[i], b):
                if candidate in roots:
                    continue
                cont = self._after_root(i + 1, roots + (candidate,), ctx)
                result = self.matchers[i](candidate, b, cont)
                if result is not None:
                    return result
            return None

        return next_root

    def _finish(self, b: dict, roots: tuple[Node, ...]):
        """Clauses in order, then the replacement; None when a guard is false or when an
        expression fails to evaluate at this match (counted in the stats: one node where, say,
        `pow` overflows must not abort the whole rewrite). A replacement of the wrong kind
        (not a node, other axes or dtype) is a wrong rule, and raises.

        The generated code runs first; if it raises, the interpreter evaluates the clauses
        again and does what the failure calls for."""
        log = graph.creation_log = []
        try:
            try:
                values = self._generated(b)
            except _NotABool:  # from the interpreter itself (no generated code): located
                raise
            except Exception:
                values = self._evaluate(dict(b))
            if values is None:
                return None
            return self.found(values, roots, log)
        except NgrulesError as e:
            raise self._error(e) from e
        finally:
            graph.creation_log = None

    def found(self, values, roots: tuple[Node, ...], log: list) -> tuple:
        """(roots, replacements, new nodes) for the replacement's values (`log`: the nodes
        created meanwhile); a replacement of the wrong kind raises."""
        return roots, self._replacements(values, roots), tuple(log)

    def located_found(self, values, roots: tuple[Node, ...], log: list) -> tuple:
        """`found`, its error located at this rule (for the generated clauses, see `fused`)."""
        try:
            return self.found(values, roots, log)
        except NgrulesError as e:
            raise self._error(e) from e

    def _interpret(self, b: dict) -> list | None:
        return self._evaluate(dict(b))

    def _evaluate(self, env) -> list | None:
        """The replacement's values, or None (a false guard, or a failure: rejected)."""
        try:
            for clause in self.rule.clauses:
                if isinstance(clause, Let):
                    env[clause.name] = self._eval(clause.expr, env)
                elif not self._holds(clause, env):
                    return None
            return [self._eval(e, env) for e in self.rule.replacement]
        except _NotABool:
            raise
        except NgrulesError as e:
            self.stats.failures += 1
            if self.stats.first_failure is None:
                self.stats.first_failure = self._error(e)
            return None

    def _eval(self, expr, env):
        compiled = self._exprs.get(id(expr))
        if compiled is None:
            compiled = self._exprs[id(expr)] = compile_expr(expr)
        try:
            return compiled(env)
        except NgrulesError:
            raise
        except Exception as e:  # a registered Python function failed
            raise RuleError(f"{type(e).__name__}: {e}", getattr(expr, "span", None)) from e

    def _holds(self, guard: Guard, env) -> bool:
        value = self._eval(guard.expr, env)
        try:
            return guard_truth(value)
        except NotBoolean:
            why = f"a guard must be true or false, got {shown(value)}"
            raise _NotABool(why, guard.span) from None

    def _replacements(self, values: list, roots: tuple[Node, ...]) -> tuple[Node, ...]:
        """The replacement's values checked against the roots: one node of each root's type."""
        if len(values) == 1 == len(roots):  # the common case, checked without copies
            value = values[0]
            if value.__class__ is Node and same_type(value, roots[0]):
                return (value,)
        exprs = self.rule.replacement
        values = list(values)  # compiled clauses give a tuple; numbers are replaced in place
        if len(values) == 1 and len(roots) > 1:
            values = _split_outputs(values[0], len(roots))
            exprs = exprs * len(roots)
        for i, (root, value) in enumerate(zip(roots, values)):
            span = exprs[i].span
            if _is_number(value):  # `x - x => 0`: the number, broadcast like the matched node
                values[i] = value = constant(value, root.axes, root.dtype)
            if not isinstance(value, Node):
                raise RuleError(f"the replacement must be a node, got {shown(value)}", span)
            if not same_type(value, root):
                raise RuleError(_type_mismatch(value, root), span)
        return tuple(values)

    def _error(self, e: NgrulesError) -> RuleError:
        where = f"rule {self.name} ({self.location})"
        err = RuleError(f"{where}: {e.message}", e.span or self.rule.span)
        return err


class RuleCache:
    """Rules compiled once each: generating a rule's matchers and clauses costs far more than
    most uses of them (a rewrite of a small graph, one `explain`, one verification step). An
    entry keeps its rule, so an id is not reused while it is cached."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[Rule, CompiledRule]] = {}

    def __call__(self, rule: Rule) -> CompiledRule:
        entry = self._entries.get(id(rule))
        if entry is None or entry[0] is not rule:
            entry = self._entries[id(rule)] = (rule, CompiledRule(rule))
        return entry[1]


#: The compiled rules that explanations and verification apply outside a rewrite; apart from
#: the driver's, whose `stats` are the rewrite results' (a failure counted here would land in
#: a result already returned).
compiled_for_checks = RuleCache()


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _NotABool(RuleError):
    """A guard that evaluated to something other than true or false: a wrong rule."""


def _type_mismatch(value: Node, root: Node) -> str:
    if value.outputs is not None:
        return f"the replacement {value.op} has several outputs; pick one with [i]"
    if value.dtype != root.dtype:
        return f"the replacement is {value.dtype} but the matched node is {root.dtype}"
    return f"the replacement has axes {value.axes!r} but the matched {root.op} has {root.axes!r}"


def _split_outputs(value, count: int) -> list:
    """A multi-output node supplies one replacement per root, output i for root i."""
    if not isinstance(value, Node) or value.outputs is None:
        raise RuleError(f"{count} roots need {count} replacements or one multi-output op")
    if len(value.outputs) != count:
        raise RuleError(f"{value.op} has {len(value.outputs)} outputs for {count} roots")
    return [make_node("Output", (value,), index=i) for i in range(count)]
