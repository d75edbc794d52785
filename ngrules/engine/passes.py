"""Which passes one rewrite call runs, and the rules it was given as a rule set."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ngrules.errors import NgrulesError
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
