"""Which rules enter an e-graph: those verified or proved, each judged on its own.

A greedy rewrite may rely on the order of a pass (a rule checked only on the nodes no earlier
rule takes); saturation applies every rule everywhere, so each rule is judged alone (a list of
rules to `verify`, not their RuleSet). A verdict comes from the verdict cache when the project
has one (`ngrules.verification.cache.last_verdict(rule)`), else from verifying the rule now.
Rules with another verdict are left out, unless `unverified` lets them in with a warning that
names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ngrules.lang.rules import Rule
from ngrules.verification.cache import last_verdict

#: The verdicts that let a rule in by default. `loops` is a rule that passed every check but
#: does not terminate when applied greedily on its own (commutativity, associativity,
#: expansion): each of its steps was checked, and an e-graph is where such a rule belongs.
ADMITTED = frozenset({"verified", "proved", "proved-reals", "proved-bounded", "loops"})


@dataclass
class Admission:
    """The rules that enter, those left out with why, and the warnings to show."""

    rules: list[Rule] = field(default_factory=list)
    left_out: list[tuple[Rule, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)  # rule name -> verdict status


def _status(verdict) -> str | None:
    if verdict is None:
        return None
    return verdict if isinstance(verdict, str) else getattr(verdict, "status", None)


def verdict_statuses(
    rules: list[Rule],
    known: Mapping[str, str] | None = None,
    run_verify: bool = True,
    **verify_options,
) -> dict[str, str]:
    """Each rule's verdict status: given in `known`, else cached, else verified now (alone;
    not with `run_verify` false: then the rule has no status)."""
    statuses = dict(known or {})
    todo = []
    for rule in rules:
        if rule.name in statuses:
            continue
        status = _status(last_verdict(rule))  # judged alone, as saturation applies it
        if status is None:
            todo.append(rule)
        else:
            statuses[rule.name] = status
    if todo and run_verify:
        from ngrules.verification.verify import verify

        report = verify(todo, **verify_options)  # a list: each rule judged on its own
        statuses.update({v.rule.name: v.status for v in report.verdicts})
    return statuses


def admit(
    rules: list[Rule],
    unverified: bool = False,
    known: Mapping[str, str] | None = None,
    **verify_options,
) -> Admission:
    """The rules that may enter the e-graph (see the module's docstring)."""
    out = Admission()
    statuses = verdict_statuses(rules, known, not unverified, **verify_options)
    out.statuses = statuses
    let_in = []
    for rule in rules:
        status = statuses.get(rule.name, "not verified")
        if status in ADMITTED:
            out.rules.append(rule)
        elif unverified:
            out.rules.append(rule)
            let_in.append(f"{rule.name} ({rule.location}: {status})")
        else:
            out.left_out.append((rule, f"verdict {status}"))
    if let_in:
        out.warnings.append(
            "warning: rules not verified entered the e-graph (--unverified): " + ", ".join(let_in)
        )
    return out
