"""Parsed files -> a `RuleSet`, checked against the op table and the function library.

Every problem found is collected, so one run reports them all (as `RuleErrors`): unknown ops,
kinds, functions and attributes, wrong arity, unbound or doubly typed variables, named
sub-patterns that are cyclic or unused, replacement counts, duplicate and unreachable rules,
pipelines that name unknown passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ngrules.errors import RuleError, RuleErrors, Span
from ngrules.ir.ops import OPS, did_you_mean, suggested_ops
from ngrules.lang.assumptions import read_assumptions
from ngrules.lang.bounds import MAX_ITEMS, items_at_least
from ngrules.lang.expr import NODE_ATTRIBUTES, all_attributes
from ngrules.lang.functions import FUNCTIONS
from ngrules.lang.kinds import KINDS
from ngrules.lang.patterns import expand_named, pattern_key
from ngrules.lang.replacements import bound_names, check_rule_statics, known_ops, static_op
from ngrules.lang.rules import BUILTIN_PASSES, Rule, RuleSet, builtin_pass
from ngrules.lang.symmetry import names_read, one_order
from ngrules.lang.syntax import (
    MAX_DEPTH,
    Assume,
    EAttr,
    ECall,
    EVar,
    Expr,
    Guard,
    Let,
    PassDecl,
    Pattern,
    PipelineDecl,
    POp,
    PVar,
    RuleDecl,
    RulesFile,
    Where,
    name_span,
    nesting_problem,
    walk,
)


@dataclass
class Problems:
    """The errors found so far; `add` keeps checking going after each one."""

    errors: list[RuleError] = field(default_factory=list)

    def add(self, message: str, span: Span | None) -> None:
        self.errors.append(RuleError(message, span))


# -- patterns --------------------------------------------------------------------------------
def _check_op_pattern(p: POp, problems: Problems) -> None:
    opdef = OPS.get(p.op)
    span = name_span(p.span, p.op)
    if opdef is None:
        problems.add(f"unknown op {p.op!r}{did_you_mean(p.op, suggested_ops())}", span)
    elif p.optional and opdef.arity != 1:
        takes = "any number of" if opdef.arity is None else opdef.arity
        problems.add(
            f"an optional wrapper needs an op of one argument; {p.op} takes {takes} arguments",
            span,
        )
    else:
        _check_arity(p.op, opdef.arity, len(p.args), span, problems)


def _check_arity(name: str, arity: int | None, got: int, span, problems: Problems) -> None:
    if arity is not None and arity != got:
        plural = "argument" if arity == 1 else "arguments"
        problems.add(f"{name} takes {arity} {plural}, got {got}", span)


def _kinds_compatible(a: str, b: str) -> bool:
    """Can one node be of kind a and of kind b (op names or kinds from KINDS)?"""
    if a == b or a in ("scalar", "constant") or b in ("scalar", "constant"):
        return True
    if a in OPS and b in OPS:
        return False
    ops = [OPS[k] for k in (a, b) if k in OPS]
    traits = [k for k in (a, b) if k not in OPS]
    candidates = ops or OPS.values()
    return any(all(t in op.traits for t in traits) for op in candidates)


class RuleChecker:
    """Checks one rule declaration and builds its `Rule`."""

    def __init__(self, decl: RuleDecl, pass_name: str, order: int, problems: Problems):
        self.decl, self.pass_name, self.order, self.problems = decl, pass_name, order, problems
        self.ops_of: dict[str, str] = {}  # variable -> the op it is known to be (`known_ops`)

    def run(self, source: str) -> Rule | None:
        before = len(self.problems.errors)
        deep = nesting_problem(self.decl, MAX_DEPTH)
        if deep is not None:
            self.problems.add(deep[1], deep[0].span)
            return None
        written = [
            *self.decl.roots,
            *(c.pattern for c in self.decl.clauses if isinstance(c, Where)),
        ]
        self._check_patterns(written)
        wheres = [c for c in self.decl.clauses if isinstance(c, Where)]
        roots = expand_named(self.decl.roots, wheres, self.problems.add)
        if roots is None:
            return None
        self.ops_of = known_ops(roots)
        bound = bound_names(roots)
        clauses = self._check_clauses(bound)
        lets = {c.name for c in clauses if isinstance(c, Let)}
        assumed = read_assumptions(self.decl.clauses, bound, lets, self.problems.add)
        self._check_replacement(roots, bound | lets)
        if len(self.problems.errors) == before:  # kinds and axes, once names are known good
            check_rule_statics(self.decl, roots, self.problems.add)
        if len(self.problems.errors) > before:
            return None
        roots = one_order(roots, names_read(self.decl.clauses))
        d = self.decl
        return Rule(
            d.name,
            self.pass_name,
            roots,
            clauses,
            d.replacement,
            d.priority or 0,
            self.order,
            d.span,
            source,
            d,
            assumed,
        )

    # -- patterns ----------------------------------------------------------------------------
    def _check_patterns(self, patterns: list[Pattern]) -> None:
        typed: dict[str, tuple[str, Span | None]] = {}
        for p in walk(patterns):
            if isinstance(p, POp):
                _check_op_pattern(p, self.problems)
            elif isinstance(p, PVar) and p.kind is not None:
                self._check_kind(p, typed)

    def _check_kind(self, p: PVar, typed: dict) -> None:
        span = name_span(p.span, p.kind, at_end=True)
        if p.kind not in OPS and p.kind not in KINDS:
            hint = did_you_mean(p.kind, [*suggested_ops(), *KINDS])
            self.problems.add(f"unknown kind {p.kind!r}{hint}; a kind is an op or a trait", span)
            return
        if p.name == "_":
            return
        first = typed.setdefault(p.name, (p.kind, p.span))
        if not _kinds_compatible(first[0], p.kind):
            self.problems.add(
                f"variable {p.name!r} is typed two incompatible ways: {first[0]} (at "
                f"{first[1]}) and {p.kind}",
                span,
            )

    # -- clauses and replacement -------------------------------------------------------------
    def _check_clauses(self, bound: set[str]) -> tuple[Guard | Let, ...]:
        lets = {c.name: c for c in self.decl.clauses if isinstance(c, Let)}
        env, out, sizes = set(bound), [], {}
        for c in self.decl.clauses:
            if isinstance(c, (Where, Assume)):
                continue  # sub-patterns are expanded, assumptions read by `read_assumptions`
            self._check_expr(c.expr, env, lets)
            size = items_at_least(c.expr, sizes, self._too_many_items)
            if isinstance(c, Let):
                sizes[c.name] = size
                if c.name in env:
                    self.problems.add(f"let {c.name!r} rebinds a name already bound", c.span)
                env.add(c.name)
                if isinstance(c.expr, ECall) and c.expr.func in OPS:
                    self.ops_of[c.name] = c.expr.func
            out.append(c)
        return tuple(out)

    def _too_many_items(self, n: int, e) -> None:
        self.problems.add(
            f"this value holds at least {n:,} items, more than the {MAX_ITEMS:,} of the cost "
            "bound of expressions (the items of nested tuples and strings counted)", e.span)

    def _check_replacement(self, roots: tuple[Pattern, ...], env: set[str]) -> None:
        for e in self.decl.replacement:
            self._check_expr(e, env, {})
        reps, n = self.decl.replacement, len(roots)
        span = reps[0].span if reps else self.decl.span
        single = reps[0] if len(reps) == 1 else None
        opdef = OPS.get(single.func) if isinstance(single, ECall) else None
        if len(reps) == n and (opdef is None or opdef.outputs == 1 or n > 1):
            return
        if len(reps) == n:
            self.problems.add(f"{opdef.name} has {opdef.outputs} outputs; pick one with [i]", span)
        elif single is not None and opdef is None:
            return  # a function might return a multi-output node: the engine checks
        elif single is not None and opdef.outputs != n:
            self.problems.add(
                f"the rule has {n} roots but {opdef.name} has {opdef.outputs} output(s)", span
            )
        elif single is None:
            self.problems.add(f"the rule has {n} root(s) but {len(reps)} replacements", span)

    def _check_expr(self, expr: Expr, env: set[str], lets: dict) -> None:
        for e in walk((expr,)):
            if isinstance(e, EVar):
                self._check_var(e, env, lets)
            elif isinstance(e, EAttr):
                self._check_attribute(e)
            elif isinstance(e, ECall):
                self._check_call(e)

    def _check_var(self, e: EVar, env: set[str], lets: dict) -> None:
        if e.name in env:
            return
        if e.name == "_":
            self.problems.add("'_' is a wildcard: it binds nothing, so it cannot be used", e.span)
        elif e.name in lets:
            self.problems.add(
                f"variable {e.name!r} is used before its let (at {lets[e.name].span})", e.span
            )
        else:
            self.problems.add(
                f"variable {e.name!r} is never bound (bind it in the pattern or with let)", e.span
            )

    def _check_attribute(self, e: EAttr) -> None:
        op = static_op(e.obj, self.ops_of)
        span = name_span(e.span, e.name, at_end=True)
        if op is not None and op in OPS:
            known = [*NODE_ATTRIBUTES, *(a.name for a in OPS[op].attrs), *OPS[op].derived]
            if e.name not in known:
                hint = did_you_mean(e.name, known)
                self.problems.add(f"{op} has no attribute {e.name!r}{hint}", span)
        elif e.name not in all_attributes():
            hint = did_you_mean(e.name, all_attributes())
            self.problems.add(f"unknown attribute {e.name!r}{hint}", span)

    def _check_call(self, e: ECall) -> None:
        span = name_span(e.span, e.func)
        names = [k for k, _ in e.kwargs]
        for i, k in enumerate(names):
            if k in names[:i]:
                self.problems.add(f"argument {k!r} is given twice", _kwarg_span(e, i))
        if e.func in OPS:
            opdef = OPS[e.func]
            _check_arity(e.func, opdef.arity, len(e.args), span, self.problems)
            known = [a.name for a in opdef.attrs]
            for i, k in enumerate(names):
                if k not in known:
                    hint = did_you_mean(k, known) if known else " (it takes no attributes)"
                    self.problems.add(f"{e.func} has no attribute {k!r}{hint}", _kwarg_span(e, i))
        elif e.func in FUNCTIONS:
            self._check_function_call(e, span)
        elif e.func[:1].isupper():
            self.problems.add(f"unknown op {e.func!r}{did_you_mean(e.func, OPS)}", span)
        else:
            hint = did_you_mean(e.func, FUNCTIONS)
            self.problems.add(f"unknown function {e.func!r}{hint}", span)

    def _check_function_call(self, e: ECall, span) -> None:
        fdef, got = FUNCTIONS[e.func], len(e.args)
        lo, hi = fdef.min_args, fdef.max_args
        if got < lo or (hi is not None and got > hi):
            want = str(lo) if lo == hi else f"{lo} or more" if hi is None else f"{lo} to {hi}"
            self.problems.add(f"{e.func} takes {want} argument(s), got {got}", span)
        sig = fdef.signature() if e.kwargs else None
        if sig is None:
            return
        params = sig.parameters
        if any(p.kind == p.VAR_KEYWORD for p in params.values()):
            return
        for i, (k, _) in enumerate(e.kwargs):
            if k not in params:
                hint = did_you_mean(k, list(params))
                self.problems.add(f"{e.func} has no argument {k!r}{hint}", _kwarg_span(e, i))


def check_expression(expr: Expr, env: set[str], problems: Problems) -> None:
    """Check one expression outside a rule (an op declaration's body or default)."""
    RuleChecker(None, "", 0, problems)._check_expr(expr, env, {})


def _kwarg_span(e: ECall, i: int) -> Span | None:
    return e.kwarg_spans[i] if i < len(e.kwarg_spans) else e.kwargs[i][1].span


# -- files -----------------------------------------------------------------------------------
def default_pass(path: str) -> str:
    """The pass of rules written before any `pass` line: the file's stem, or `main`."""
    stem = Path(path).stem
    return stem if stem.isidentifier() else "main"


def rule_sources(file: RulesFile) -> dict[int, str]:
    """The text of each rule (by decl index): up to the next declaration, less trailing comments."""
    if not file.text:
        return {}
    lines = file.text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    offsets = [starts[d.span.line - 1] + d.span.col - 1 if d.span else 0 for d in file.decls]
    offsets.append(len(file.text))
    out = {}
    for i, d in enumerate(file.decls):
        if isinstance(d, RuleDecl):
            chunk = file.text[offsets[i] : offsets[i + 1]].split("\n")
            while len(chunk) > 1 and (not chunk[-1].strip() or chunk[-1].strip()[0] == "#"):
                chunk.pop()
            out[i] = "\n".join(chunk).rstrip()
    return out


def check(
    files: Sequence[RulesFile], errors: Sequence[RuleError] = (), order: Sequence[str] = ()
) -> RuleSet:
    """The rule set of files (in load order); raise `RuleErrors` with every problem found.

    errors: problems found before checking (syntax, imports); order: the paths in the order
    errors should be listed (default: the order of files).
    """
    problems = Problems(list(errors))
    rules: list[Rule] = []
    passes: dict[str, list[Rule]] = {}
    pipelines: list[PipelineDecl] = []
    for f in files:
        _check_file(f, problems, rules, passes, pipelines)
    _check_duplicates(rules, problems)
    ordered = {
        name: tuple(sorted(rs, key=lambda r: (-r.priority, r.order))) for name, rs in passes.items()
    }
    for rs in ordered.values():
        _check_reachable(rs, problems)
    pipes = _check_pipelines(pipelines, ordered, problems)
    if problems.errors:
        index = {path: i for i, path in enumerate(order or [f.path for f in files])}
        problems.errors.sort(key=lambda e: _position(e.span, index))
        raise RuleErrors(problems.errors)
    return RuleSet(tuple(rules), ordered, pipes)


def _position(span: Span | None, index: dict[str, int]) -> tuple[int, int, int]:
    if span is None:
        return (-1, 0, 0)
    return (index.get(span.file, -1), span.line, span.col)


def _check_file(f: RulesFile, problems: Problems, rules: list, passes: dict, pipelines: list):
    current = default_pass(f.path)
    sources = rule_sources(f)
    for i, d in enumerate(f.decls):
        if isinstance(d, PassDecl):
            current = d.name
            if builtin_pass(current):
                problems.add(
                    f"pass {current!r} is built in ({builtin_pass(current)}): "
                    "a pipeline may name it, a rules file may not declare it", d.span
                )
            passes.setdefault(current, [])
        elif isinstance(d, PipelineDecl):
            pipelines.append(d)
        elif isinstance(d, RuleDecl):
            rule = RuleChecker(d, current, len(rules), problems).run(sources.get(i, ""))
            passes.setdefault(current, [])
            if rule is not None:
                rules.append(rule)
                passes[current].append(rule)


def _check_duplicates(rules: list[Rule], problems: Problems) -> None:
    first: dict[str, Rule] = {}
    for r in rules:
        if r.name in first:
            problems.add(
                f"duplicate rule name {r.name!r} (first defined at {first[r.name].location})",
                r.decl.name_span if r.decl else r.span,
            )
        else:
            first[r.name] = r


def _check_reachable(rules: Sequence[Rule], problems: Problems) -> None:
    """A rule can never fire when an earlier guard-free rule of its pass has the same pattern."""
    unconditional: dict[tuple, Rule] = {}
    for r in rules:
        key = pattern_key(r.roots)
        earlier = unconditional.get(key)
        if earlier is not None and earlier.name != r.name:  # else: a duplicate, reported once
            problems.add(
                f"rule {r.name!r} can never fire: rule {earlier.name!r} ({earlier.location}) "
                f"has the same pattern, no guard, and comes first in pass {r.pass_name!r}",
                r.decl.name_span if r.decl else r.span,
            )
        elif earlier is None and not any(isinstance(c, Guard) for c in r.clauses):
            unconditional[key] = r


def _check_pipelines(pipelines: list[PipelineDecl], passes: dict, problems: Problems) -> dict:
    out: dict[str, tuple[str, ...]] = {}
    seen: dict[str, PipelineDecl] = {}
    for p in pipelines:
        if p.name in seen:
            problems.add(
                f"pipeline {p.name!r} is defined twice (first at {seen[p.name].span})", p.span
            )
            continue
        seen[p.name] = p
        for i, name in enumerate(p.passes):
            if name not in passes and not builtin_pass(name):
                span = p.pass_spans[i] if i < len(p.pass_spans) else p.span
                hint = did_you_mean(name, [*passes, *BUILTIN_PASSES])
                problems.add(f"unknown pass {name!r} in pipeline {p.name!r}{hint}", span)
        out[p.name] = p.passes
    return out
