"""Multi-root rules in an e-graph, matched on the current best graph.

A multi-root rule (batchnorm's forward and backward fusions) finds its further roots among
the users of the nodes its first root bound: it needs a concrete graph with users, not a
single term. Each iteration, the e-graph's cheapest graph by tree cost (the greedy
extraction) is built, each rule's multi-root round (`engine.multiroot.Context`, one per rule,
so that one rule's match does not hide another's) runs on it, and each match's roots are
joined with its replacements in the e-graph. When the best graph keeps ONNX ops whole (an
op's body costs what the op does), the rules also run on the graph with every composite
lowered to its body, where the e-graph has it: multi-root rules over primitives (Tensat's
merges of products sharing an operand) match there. So a multi-root rule sees one or two
graphs per iteration, not every combination of equal terms.
"""

from __future__ import annotations

from collections.abc import Sequence

from ngrules.engine.compiled import CompiledRule
from ngrules.engine.multiroot import Context
from ngrules.ir.graph import Node
from ngrules.saturation.egraph import EGraph
from ngrules.saturation.extract import build, greedy
from ngrules.saturation.shared import shared_choice


class MultiRoot:
    """The multi-root rules of a run and the matches already applied (each applied once)."""

    def __init__(self, rules: list[CompiledRule]):
        self.rules = rules
        self.done: set[tuple[int, tuple[Node, ...]]] = set()

    def apply(self, eg: EGraph, roots: Sequence[int], applied: dict[str, int]) -> None:
        """Match the rules on the current best graph and join what they match with what
        they build (counted in `applied`)."""
        if not self.rules:
            return
        classes = eg.reachable(roots)
        best, _ = build(eg, greedy(eg, classes), roots)
        choice = shared_choice(eg, classes, roots, lowered=True)  # merged values shared
        lowered, _ = build(eg, choice or greedy(eg, classes, lowered=True), roots)
        graphs = [best] if lowered == best else [best, lowered]
        for i, rule in enumerate(self.rules):
            for outputs in graphs:
                self._round(eg, i, rule, outputs, applied)

    def _round(self, eg: EGraph, i: int, rule: CompiledRule, outputs, applied) -> None:
        ctx = Context(outputs)  # one round per rule: a match never blocks another rule's
        for node in ctx.order:
            if rule.root_ops is not None and node.op not in rule.root_ops:
                continue
            found = rule.apply(node, ctx)
            if found is None or (i, found[0]) in self.done:
                continue
            self.done.add((i, found[0]))
            for root, replacement in zip(found[0], found[1]):
                matched, built = eg.add(root), eg.add(replacement, rule.rule)
                eg.union(matched, built)
                eg.history.append((rule.rule, matched, built, eg.created))
            applied[rule.name] = applied.get(rule.name, 0) + 1
