"""The rewrite driver: passes of rules applied to a graph, to a fixpoint.

Nodes are immutable and hash-consed, so a pass never edits the input: it walks the graph once
from the leaves up, rebuilding each node on its already-rewritten arguments and then applying
the pass's rules at it until none matches. A replacement's new nodes are normalised the same way
before it stands in for the matched node. Every node is rebuilt at most once per pass, so a pass
costs time linear in the graph plus the work of the rewrites themselves; only the region a
rewrite touched is revisited. Work is kept on an explicit stack (no recursion on graph depth).

A rebuilt node that is new enters the hash-consing table only if it stays: when the rules that
could fire at it build nothing (`=> x`), they are tried first, so a node a rule replaces at
once is never interned (a rule that builds nodes could build this one again: it is interned
first).

A node that a rule could fuse away (its op lies below the root of a rule's pattern) is not
rebuilt when its arguments change: it stays pending (see `pending`), the rules match it
through a view of its arguments' normal forms, and it is rebuilt only if something needs it.
So a subgraph fused into one op costs no rebuilding of its inner nodes, and `-(-x) => x`
never builds the inner negation it cancels (`=> x` rules are tried on views with pending
arguments, and return a pending x as it is).

Rules with several roots need the users of the nodes they bind, so they run between walks, on
a settled graph: each round takes every non-overlapping match in one walk and applies them
together (see `multiroot`), then a walk normalises what they built.

Termination: a rewrite whose result is a node still being normalised would loop forever; the
engine stops with `stop == "cycle"` and names the rules that formed the cycle, in order. Fuel
bounds the total number of rewrites (`stop == "fuel"`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ngrules.budget import Budget
from ngrules.engine import reading
from ngrules.engine.compiled import CompiledRule, RuleCache, RuleStats, inner_ops
from ngrules.engine.dispatch import first_in_order, rules_at_op
from ngrules.engine.folding import Folding
from ngrules.engine.multiroot import Context, apply_together
from ngrules.engine.normalize import Cycle, Normalizing
from ngrules.engine.passes import Lowering, as_ruleset, pass_names, steps
from ngrules.engine.pending import Pending
from ngrules.engine.presence import Census, skipped
from ngrules.engine.results import RewriteResult, Run, stopped_by_cycle
from ngrules.ir import composite
from ngrules.ir.canonical import PASS_NAME as CANONICAL
from ngrules.ir.canonical import canonical_layout
from ngrules.ir.filebytes import FileBytes
from ngrules.ir.graph import (
    Node,
    creation_order,
    fresh_on,
    interned_ref,
    live_rebuilt,
    paused_gc,
    rebuilt_on,
    register,
    registered_on,
    validate,
)
from ngrules.lang.rules import BUILTIN_PASSES, Rule, RuleSet


def _any_pending(args: tuple[Node, ...], pending: Pending) -> bool:
    return not pending.keys().isdisjoint(args)


class _Pass(Normalizing):
    """One pass's rules, indexed by root op, with the pass-wide memo of normal forms."""

    def __init__(self, name: str, rules: list[CompiledRule], run: Run,
                 census: Census | None = None):
        self.name, self.run = name, run
        self.census = Census() if census is None else census  # the graph's order, op counts
        self.direct = not run.timed  # walks call the generated `first` of each op directly
        self.single = [r for r in rules if not r.is_multi_root]
        self.multi = [r for r in rules if r.is_multi_root]
        self.memo: dict[Node, Node] = {}
        self.pending = Pending(self.memo)
        #: Ops that a rule can fuse away (below its pattern's root: `-(-x) => x` drops both
        #: negations): a node with one of them whose arguments changed waits, pending, rather
        #: than being rebuilt at once.
        self.lazy = set().union(*(inner_ops(r.rule.roots[0]) for r in self.single))
        self._only_returns: dict[str, bool] = {}  # every rule at the op is `=> x`, no clauses
        self._index: dict[str, list[CompiledRule]] = {}
        self._multi_index: dict[str, list[CompiledRule]] = {}
        #: Lazy ops no rule can rewrite: a pending node with one is in `pending` only, not in
        #: the memo (one insert per fused-away node, not two); its image is itself.
        self.pending.bare = frozenset(op for op in self.lazy if not self.rules_for(op))
        #: Ops whose rules are all `=> x` (see `_rebuild_returning`), known when every rule
        #: names its root's ops; the walk's generated dispatch tries them on a view.
        self.returning = self._returning_ops() if self.direct else frozenset()

    def _returning_ops(self) -> frozenset[str]:
        if any(r.root_ops is None for r in self.single):
            return frozenset()
        ops = set().union(*(r.root_ops for r in self.single))
        return frozenset(op for op in ops if self._only_returns_at(op))

    def _only_returns_at(self, op: str) -> bool:
        self.rules_for(op)
        return self._only_returns[op]

    def rules_for(self, op: str) -> list[CompiledRule]:
        rules = self._index.get(op)
        if rules is None:
            rules = self._index[op] = rules_at_op(self.single, op)
            self._only_returns[op] = all(r.returns_a_binding for r in rules)
        return rules

    def multi_rules_for(self, op: str) -> list[CompiledRule]:
        rules = self._multi_index.get(op)
        if rules is None:
            rules = self._multi_index[op] = rules_at_op(self.multi, op)
        return rules

    def _on_view(self, order: list[Node], ops: set[str] | None) -> dict[str, object]:
        """For each op of these nodes (`ops`, when known) whose rules are all `=> x`, their
        generated `first_on` (see dispatch), which tries them on a node's view before it is
        built (the walk reads it for the nodes of `order` only)."""
        if ops is None:
            ops = {n.op for n in order} if self.returning else set()
        found = {op: self.rules_for(op).first_on for op in self.returning if op in ops}
        return {op: f for op, f in found.items() if f is not None}

    # -- single-root rules: one walk from the leaves up ----------------------------------------
    def walk(self, outputs: Sequence[Node], census: Census | None = None) -> list[Node]:
        """Normal forms of the outputs. Arguments come first in topological order. A node whose
        arguments changed is rebuilt on their normal forms, unless a rule could fuse it away
        (its op is in `lazy`): then it becomes pending (see `pending`), matched through its
        view and rebuilt only if needed. Only a rewrite's result is normalised on the explicit
        stack. `census`: the graph's order and ops, when known (`presence`)."""
        memo, pending, lazy, index = self.memo, self.pending, self.lazy, self._index
        order = creation_order(outputs) if census is None else census.order
        on_view = self._on_view(order, None if census is None else census.ops)
        returning, run, name = self.returning, self.run, self.name
        memo_get, bare, direct = memo.get, self.pending.bare, self.direct
        self.run.budget.size_for(len(order))
        for node in run.budget.paced(order, f"matching in pass {name}"):
            args = node.args
            if args:
                arity = len(args)
                if arity == 1:  # an image None: a bare pending node (see `bare`)
                    (a,) = args
                    image = memo_get(a)
                    if image is None:
                        image, changed = a, True
                    else:
                        changed = image is not a or a in pending
                    images = (image,)
                elif arity == 2:
                    a, b = args
                    image, other = memo_get(a), memo_get(b)
                    if image is None or other is None:
                        changed = True
                        image = a if image is None else image
                        other = b if other is None else other
                    else:
                        changed = (image is not a or other is not b or a in pending
                                   or b in pending)
                    images = (image, other)
                else:
                    images = tuple([memo_get(a, a) for a in args])
                    changed = images != args or _any_pending(args, pending)
                if changed:
                    op = node.op
                    if op in lazy:
                        first_on = on_view.get(op) if on_view else None
                        if first_on is not None:  # `=> x` rules, tried on its view
                            rule, value = first_on(node, images, pending, run, name)
                            if rule is None:  # it stays, pending: built only if needed
                                pending[node] = images
                                memo[node] = node
                            else:
                                memo[node] = self._returned(value, node, rule)
                            continue
                        pending[node] = images
                        if op in bare:
                            continue
                    else:
                        first_on = on_view.get(op)
                        if pending and (image in pending if arity == 1 else  # an image waits
                                        image in pending or other in pending if arity == 2
                                        else _any_pending(images, pending)):
                            if first_on is not None:  # `=> x` rules read pending images too
                                rule, value = first_on(node, images, pending, run, name)
                                if rule is not None:
                                    memo[node] = self._returned(value, node, rule)
                                    continue
                            images = tuple([pending.force(i) for i in images])  # build first
                            if first_on is not None:  # they failed on the view: on the node too
                                rebuilt = node.with_args(images)
                                memo[node] = memo.setdefault(rebuilt, rebuilt)
                                continue
                        if first_on is None:
                            if op in returning:
                                self._rebuild_returning(node, images)
                                continue
                            rules = index.get(op)
                            if rules is None:
                                rules = self.rules_for(op)
                            if rules:
                                self._rebuild(node, images)
                                continue
                            # no rules at its op (most nodes): built below, looked up once
                        key = (op, images, node._key[2])  # its key on images (see interned_ref)
                        ref = interned_ref(key)
                        live = None if ref is None else ref()
                        if live is not None:  # built already: its own rules, unless known
                            if live.origin is None and node.origin is not None:
                                live.origin = node.origin  # provenance, as `rebuilt_on`
                            done = memo_get(live)
                            if done is None:
                                rule, found = index[op].first(live, pending, run, name)
                                done = live if rule is None else self._result(
                                    found[1][0], live, rule)
                                memo[live] = done
                            memo[node] = done
                            continue
                        if first_on is not None:
                            rule, value = first_on(node, images, pending, run, name)
                            if rule is not None:  # node not built: the trace rebuilds it
                                memo[node] = self._returned(value, node, rule)
                                continue
                        # none would match the built node either: it stays
                        rebuilt = registered_on(node, images, key)
                        memo[node] = memo[rebuilt] = rebuilt
                        continue
                else:
                    done = memo.get(node)  # reached before as a rebuilt node: known
                    if done is not None:
                        continue
            rules = index.get(node.op)
            if rules is None:
                rules = self.rules_for(node.op)
            if not rules:  # its own normal form, or pending: rebuilt when needed
                memo[node] = node
                continue
            # unchanged or pending: the rules at it, its normal form into the memo
            rule, found = (rules.first(node, pending, run, name) if direct
                           else self._first_match(node, rules))
            if rule is None:  # its own normal form; if pending, rebuilt when needed (or already)
                memo.setdefault(node, node)
            else:
                memo[node] = self._result(found[1][0], node, rule)
        force = pending.force
        return [force(memo_get(o, o)) for o in outputs]

    def _returned(self, value: Node, node: Node, rule: CompiledRule) -> Node:
        """The normal form of a `=> x` rule's result at a node not built. A pending x (read
        through a view) is its own image until something forces it."""
        done = self.memo.get(value)
        if done is not None:
            return done
        return value if value in self.pending else self._result(value, node, rule)

    def _rebuild(self, node: Node, images: tuple[Node, ...]) -> None:
        """A node that no rule fuses away, rebuilt on its arguments' (built) normal forms, then the
        rules at it. A new node enters the hash-consing table only if it stays: when the rules
        that could fire at it build nothing (`=> x`), they are tried first."""
        memo, op = self.memo, node.op
        rules = self._index.get(op)
        if rules is None:
            rules = self.rules_for(op)
        rebuilt, fresh = rebuilt_on(node, images)
        if fresh:
            if not rules:  # most nodes: nothing to try, nothing built since the lookup
                memo[node] = memo[rebuilt] = register(rebuilt)
                return
            if not self._only_returns[rebuilt.op]:  # a rule may build on it: intern first
                rebuilt, fresh = register(rebuilt), False
        else:
            done = memo.get(rebuilt)
            if done is not None:
                memo[node] = done
                return
        if not rules:
            rule = None
        elif self.direct:
            rule, found = rules.first(rebuilt, self.pending, self.run, self.name)
        else:
            rule, found = self._first_match(rebuilt, rules)
        if rule is None:
            # `=> x` rules built nothing, and a pending node they rebuilt lies below this one:
            # the key is still free
            memo[node] = memo[rebuilt] = register(rebuilt) if fresh else rebuilt
        elif fresh:  # replaced before it was interned: nothing can reach it again
            memo[node] = self._result(found[1][0], rebuilt, rule)
        else:
            memo[node] = memo[rebuilt] = self._result(found[1][0], rebuilt, rule)

    def _rebuild_returning(self, node: Node, images: tuple[Node, ...]) -> None:
        """`_rebuild` for a node whose rules are all `=> x`: if it would be a new node, they
        are tried on its view before it is built (node is held pending while they are), and
        one that replaces it saves building it (it stays pending: the trace rebuilds it when
        read)."""
        if live_rebuilt(node, images) is not None:
            self._rebuild(node, images)
            return
        memo, pending = self.memo, self.pending
        pending[node] = images
        rule, found = self._index[node.op].first(node, pending, self.run, self.name)
        if rule is None:  # none would match the built node either: it stays
            del pending[node]
            rebuilt = register(fresh_on(node, images))
            memo[node] = memo[rebuilt] = rebuilt
            return
        replacement = found[1][0]
        done = memo.get(replacement)
        memo[node] = done if done is not None else self._result(replacement, node, rule)

    def _result(self, replacement: Node, rewritten: Node, rule: CompiledRule) -> Node:
        memo = self.memo
        done = memo.get(replacement)
        if done is not None:
            return done
        for a in replacement.args:
            if memo.get(a) is not a:
                return self._normalize(replacement, rewritten, rule)
        if self.rules_for(replacement.op):
            return self._normalize(replacement, rewritten, rule)
        memo[replacement] = replacement  # a new node on normal forms that no rule rewrites
        return replacement

    def _first_match(self, node: Node, rules, ctx=None):
        """The first of `rules` that matches at node, counted and recorded: (rule, found), or
        (None, None). found is (roots, replacements, new nodes)."""
        run, pending = self.run, self.pending
        if run.budget.exhausted:
            return None, None
        if ctx is None and not run.timed:  # a walk: one generated function tries them all
            return rules.first(node, pending, run, self.name)
        return first_in_order(rules, node, ctx, pending, run, self.name)

    # -- multi-root rules: matched on a settled graph, applied together -----------------------
    def multi_round(self, outputs: list[Node]) -> dict[Node, Node]:
        """The roots of every non-overlapping multi-root match on the settled graph, found in
        one walk over one users index, mapped to their replacements."""
        ctx = Context(outputs)
        chosen: dict[Node, Node] = {}
        for node in ctx.order:
            if node in ctx.roots:
                continue
            rules = self.multi_rules_for(node.op)
            if rules:
                rule, found = self._first_match(node, rules, ctx)
                if rule is not None:
                    chosen.update(zip(found[0], found[1]))
        self.run.rounds += 1
        return chosen

    def apply(self, outputs: list[Node]) -> list[Node]:
        census = self.census.of(outputs)
        if self.direct and skipped(self, census):  # no rule can match: nothing would change
            return list(outputs)
        outputs = self.walk(outputs, census)
        while self.multi and not self.run.budget.exhausted:
            chosen = self.multi_round(outputs)
            if not chosen:
                break
            outputs = self.walk(apply_together(outputs, chosen))
        return outputs


#: Each rule compiled once; a rewrite gives the compiled rules its own stats (see `_rewrite`).
_compile = RuleCache()


def rewrite(
    outputs: Sequence[Node],
    rules: RuleSet | Rule | Iterable[Rule],
    pipeline: str | None = None,
    passes: Sequence[str] | None = None,
    fuel: int | None = None,
    checked: bool = False,
    stats: bool = False,
    fold_limit: int | None = None,
    budget: Budget | None = None,
    spend: FileBytes | None = None,
) -> RewriteResult:
    """Apply passes of rules to the graph of `outputs`; the input graph is never changed.

    pipeline names a pipeline of the rule set; passes lists pass names; with neither, every
    pass runs in declaration order. fuel bounds the number of rewrites (default: ten per node
    plus 10,000). checked re-infers each replacement's nodes and validates the whole graph
    after each pass. stats times every attempt of every rule (`result.stats[rule].seconds`);
    attempts and matches are counted either way. fold_limit bounds the elements of one value
    the built-in pass `fold_constants` computes (default `folding.DEFAULT_LIMIT`). budget
    bounds the whole call (`ngrules.budget`; default 2 GiB, 120 s): past it, `BudgetExceeded`.
    Unless the passes name `decompose*`, `canonical_layout` or `recompose`, each pass reads an
    imported model as its rules are written (`reading`: the ONNX ops they name lowered).
    spend: a model file's bytes (`Imported.spendable`) from a caller done with the input graph:
    folding may write a weight over the one it is made from, in the input (`spending`).
    """
    ruleset = as_ruleset(rules)
    names = pass_names(ruleset, pipeline, passes)
    with paused_gc():
        return _rewrite(outputs, ruleset, names, Run(fuel, checked, stats, budget), fold_limit,
                        spend)


def _rewrite(outputs, ruleset: RuleSet, names: list[str], run: Run, fold_limit=None, spend=None):
    current = list(outputs)
    checked = run.checked
    if checked:
        validate(current)
    stats: dict[str, RuleStats] = {}
    result = RewriteResult(current, run, stats, names)
    auto = reading.by_default(ruleset, names)  # composites lowered as each pass's rules read
    census = Census()  # the graph's order and op counts, kept while passes change nothing
    for name in steps(names, ruleset):
        run.budget.settle(f"before pass {name}")
        if isinstance(name, Lowering):  # built-in `decompose` or `decompose_<Op>` passes
            current = composite.decompose(current, name.ops)
            continue
        if name == composite.RECOMPOSE and name not in ruleset.passes:
            current = composite.recompose(current)
            continue
        if name == CANONICAL and name not in ruleset.passes:
            current = canonical_layout(current)
            continue
        if name in BUILTIN_PASSES and name not in ruleset.passes:
            folding = Folding(fold_limit, run.budget.meter, spend)
            current = folding.apply(current)
            result.folded.extend(folding.folded)
            continue
        compiled = [_compile(r) for r in ruleset.passes[name]]
        for c in compiled:
            c.stats = stats.setdefault(c.name, RuleStats())
        one = _Pass(name, compiled, run, census)
        try:
            current = (reading.applied(one, current, ruleset.passes[name], run.trace) if auto
                       else one.apply(current))
        except Cycle as cycle:
            return stopped_by_cycle(result, current, cycle, name)
        if checked:
            validate(current)
        if run.budget.exhausted:
            result.outputs, result.stop = current, "fuel"
            result.message = f"fuel ran out after {len(run.trace)} rewrites in pass {name}"
            return result
    result.outputs = current
    return result
