"""Graphs a rewrite's `fold_constants` ran on, told to whoever keeps records of their values.

An ONNX import records the nodes that computed each shape value it folded, so a round trip
with no rule writes them back; a rewrite that folds constants has made those values constants
on purpose, so the records of its graph's inputs are dropped. The IR cannot name the importer
(a layer above it): the importer registers a hook here instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ngrules.ir.graph import Node

_HOOKS: list[Callable[[Sequence[Node]], None]] = []


def on_fold(hook: Callable[[Sequence[Node]], None]) -> None:
    """Call `hook(inputs)` each time constants are folded in a graph, with its graph inputs
    (its Placeholders, which the folding walk visits: the hook need not walk the graph)."""
    if hook not in _HOOKS:
        _HOOKS.append(hook)


def folded(inputs: Sequence[Node]) -> None:
    """Tell every hook that the graph whose Placeholders are `inputs` had its constants
    folded."""
    for hook in _HOOKS:
        hook(inputs)
