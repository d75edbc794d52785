"""Which passes one rewrite call runs, and the rules it was given as a rule set."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ngrules.errors import NgrulesError
from ngrules.ir.composite import pass_ops
from ngrules.ir.ops import did_you_mean
from ngrules.lang.rules import BUILTIN_PASSES, Rule, RuleSet, builtin_pass


def pass_names(rules: RuleSet, pipeline: str | None, passes: Sequence[str] | None) -> list[str]:
    """The passes to run: the pipeline's, the ones named, or every pass in declaration order."""
    if pipeline is not None and passes is not None:
        raise NgrulesError("give a pipeline or a list of passes, not both")
    if pipeline is not None:
        if pipeline not in rules.pipelines:
            hint = did_you_mean(pipeline, rules.pipelines)
            raise NgrulesError(f"no pipeline named {pipeline!r}{hint}")
        return list(rules.pipelines[pipeline])
    names = list(passes) if passes is not None else list(rules.passes)
    for name in names:
        if name not in rules.passes and not builtin_pass(name):
            hint = did_you_mean(name, [*rules.passes, *BUILTIN_PASSES])
            raise NgrulesError(f"no pass named {name!r}{hint}")
    return names


def as_ruleset(rules: RuleSet | Rule | Iterable[Rule]) -> RuleSet:
    """Rules given one by one, grouped into their passes (highest priority first)."""
    if isinstance(rules, RuleSet):
        return rules
    rules = (rules,) if isinstance(rules, Rule) else tuple(rules)
    grouped: dict[str, list[Rule]] = {}
    for r in rules:
        grouped.setdefault(r.pass_name, []).append(r)
    passes = {k: tuple(sorted(v, key=lambda r: (-r.priority, r.order))) for k, v in grouped.items()}
    return RuleSet(rules, passes, {})


class Lowering(str):
    """Built-in `decompose` or `decompose_<Op>` passes in a row (their names, comma-separated),
    run as one walk that lowers what they lower (`ops`, None: every composite)."""

    ops: list[str] | None

    def __new__(cls, names: str, ops: list[str] | None) -> Lowering:
        self = super().__new__(cls, names)
        self.ops = ops
        return self


def steps(names: Sequence[str], rules: RuleSet) -> list[str]:
    """The passes as a rewrite runs them: consecutive built-in `decompose*` passes as one
    `Lowering`. Each pass lowers composites into primitives, which no other composite is built
    of, so lowering all their ops in one walk gives the graph lowering them in turn gives, with
    each body built once, on its final arguments (not again each time a later pass lowers a
    composite it reads)."""
    found: list[str] = []
    for name in names:
        ops = pass_ops(name) if name not in rules.passes else False
        last = found[-1] if found else None
        if ops is False:
            found.append(name)
        elif isinstance(last, Lowering):
            both = None if last.ops is None or ops is None else [*last.ops, *ops]
            found[-1] = Lowering(f"{last}, {name}", both)
        else:
            found.append(Lowering(name, ops))
    return found
