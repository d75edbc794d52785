"""Checked rules and rule sets: what the checker produces and the engine consumes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import field, replace

from ngrules.errors import NgrulesError, Span
from ngrules.lang.assumptions import Assumption
from ngrules.lang.shipped import short_location
from ngrules.lang.syntax import Expr, Guard, Let, Pattern, RuleDecl
from ngrules.records import frozen

#: Passes the engine provides, which a pipeline may name without any rules file declaring
#: them (and no rules file may declare): name -> what it does.
BUILTIN_PASSES: dict[str, str] = {
    "fold_constants": "evaluates every node whose arguments are all constants (bounded in size)",
    "canonical_layout": "moves layout views (ReorderAxes, Broadcast) out of the elementwise ops "
    "they feed, so rules match an imported model as written",
    "decompose": "lowers every composite op (an ONNX op kept whole) into the primitives of its "
                 "body; `decompose_<Op>` lowers only the nodes of <Op>",
    "recompose": "makes every body `decompose` wrote that no rule changed since its composite "
                 "op again (what later passes should not lower)",
}


def builtin_pass(name: str) -> str | None:
    """What the built-in pass `name` does, or None when no built-in pass has that name."""
    from ngrules.ir.composite import pass_ops

    if name in BUILTIN_PASSES:
        return BUILTIN_PASSES[name]
    ops = pass_ops(name)
    if ops == ["simple"]:
        return "lowers the composite ops whose body is one primitive (views aside)"
    return f"lowers every {ops[0]} node (a composite op) into its body" if ops else None


@frozen
class Rule:
    """One checked rule.

    `roots` are the patterns with every named sub-pattern (`where` blocks, `x @ p` and later
    bare uses of x) written out as `PNamed` at each use, so a matcher may meet them in any
    order. `clauses` are the guards and lets in source order. `replacement` has one expression
    per root, or a single expression whose multi-output node supplies every root.
    `assumptions` are the value ranges its `assume` clauses promise, one per variable: never
    checked by the engine, honoured by verification.
    """

    name: str
    pass_name: str
    roots: tuple[Pattern, ...]
    clauses: tuple[Guard | Let, ...]
    replacement: tuple[Expr, ...]
    priority: int = 0
    order: int = 0
    span: Span | None = field(default=None, compare=False)
    source: str = field(default="", compare=False, repr=False)
    decl: RuleDecl | None = field(default=None, compare=False, repr=False)
    assumptions: tuple[Assumption, ...] = ()

    @property
    def floats(self) -> str:
        """"reals" for a rule that says `assume reals` (a rewrite of real numbers), else
        "ieee": how verification judges its values (`verification.compare`)."""
        from ngrules.lang.assumptions import over_the_reals

        if self.decl is None:  # (a pattern variable named `reals` made it a comparison: an
            return "ieee"  # error, so a loaded rule's `assume reals` is this clause)
        return "reals" if any(over_the_reals(c) for c in self.decl.clauses) else "ieee"

    @property
    def location(self) -> str:
        """`file:line` of the rule, as traces and errors show it (`ngrules:rules/...` for a
        shipped rule)."""
        if self.span is None:
            return "<unknown>"
        return short_location(f"{self.span.file}:{self.span.line}")


@frozen
class RuleSet:
    """Rules in load order, grouped into passes (highest priority first, then file order);
    `ops` names the ops its files declare (`op Name(...) = body`)."""

    rules: tuple[Rule, ...]
    passes: dict[str, tuple[Rule, ...]]
    pipelines: dict[str, tuple[str, ...]]
    ops: tuple[str, ...] = ()
    #: Located warnings of loading (`bidi_warnings`): the load succeeded, a reader should look.
    warnings: tuple = field(default=(), compare=False)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __str__(self) -> str:
        """The rules as `fmt` writes them, pass by pass, each under its location; then the
        pipelines (what `print(rules)` shows: the text, not the syntax tree)."""
        from ngrules.lang.formatter import format_rule

        lines: list[str] = []
        for name, rules in self.passes.items():
            lines += [f"pass {name}", ""] if not lines else ["", f"pass {name}", ""]
            for r in rules:
                text = format_rule(r.decl) if r.decl is not None else f"rule {r.name}: ..."
                lines += [f"# {r.location}", text]
        lines += [f"pipeline {p}: {', '.join(ps)}" for p, ps in self.pipelines.items()]
        return "\n".join(lines)

    def __len__(self) -> int:
        return len(self.rules)

    def without(self, names: Iterable[str]) -> RuleSet:
        """The rule set as if the named rules were not written: out of their passes, so later
        rules get the nodes they would have taken. Each name must be a rule's (a typo is an
        error, not a no-op)."""
        off = set(names)
        for name in sorted(off):
            self.rule(name)
        passes = {p: tuple(r for r in rs if r.name not in off) for p, rs in self.passes.items()}
        return replace(self, rules=tuple(r for r in self.rules if r.name not in off), passes=passes)

    def rule(self, name: str) -> Rule:
        for r in self.rules:
            if r.name == name:
                return r
        from ngrules.ir.ops import did_you_mean

        raise NgrulesError(
            f"no rule named {name!r}{did_you_mean(name, [r.name for r in self.rules])}"
        )
