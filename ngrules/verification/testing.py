"""Hypothesis strategies and checks for property tests of rewrites, in users' own test suites.

    from hypothesis import given
    from ngrules.verification import testing
    @given(testing.instances(rules.rule("mul_one")))
    def test_mul_one(inst):
        testing.check_rewrite(inst.outputs, inst.after, inst.feeds)

`axes()` draws named axes, `tensors(axes)` values for them, `graphs()` random graphs built
from the op table, `instances(rule)` graphs matching a rule's pattern (rewritten by it), whose
left side is finite on their feeds unless `finite=False`, and `check_rewrite(before, after)`
asserts that two graphs compute the same values: as the verifier judges them (IEEE floats,
strict semantics: an `after` NaN or infinite where `before` is finite fails; refinement when
asked).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from ngrules.errors import ExecutionError
from ngrules.ir.axes import Axes
from ngrules.ir.graph import Node, toposort
from ngrules.ir.ops import OPS
from ngrules.lang.syntax import POp, PVar
from ngrules.verification.compare import ATOL, RTOL, SEMANTICS, compare
from ngrules.verification.instances import Builder, Instance, Reject, feeds_for
from ngrules.verification.instances import instances as _instances
from ngrules.verification.verdicts import Counterexample

__all__ = ["axes", "check_rewrite", "graphs", "instances", "tensors"]

_BOUNDS = {"real": (-2.0, 2.0), "positive": (0.5, 2.0), "nonzero": (0.5, 2.0)}


@st.composite
def axes(draw, min_rank: int = 0, max_rank: int = 3) -> Axes:
    """Axes with distinct fresh names (a, b, c...) and lengths 1-5."""
    return Builder(draw).fresh(draw(st.integers(min_rank, max_rank)))


def tensors(
    of_axes: Axes, dtype=np.float64, domain: str = "real"
) -> st.SearchStrategy[np.ndarray]:
    """Arrays shaped like the axes, with values in an op domain (real, positive, nonzero)."""
    from hypothesis.extra.numpy import arrays

    lo, hi = _BOUNDS[domain]
    values = st.floats(lo, hi, allow_nan=False, width=np.dtype(dtype).itemsize * 8)
    if domain == "nonzero":
        values = st.tuples(values, st.booleans()).map(lambda vs: -vs[0] if vs[1] else vs[0])
    return arrays(np.dtype(dtype), of_axes.lengths, elements=values)


def _ops_for_graphs(ops: Sequence[str] | None) -> list[str]:
    """Ops a random graph may use: single-output, non-leaf ops of the table by default."""
    if ops is not None:
        return list(ops)
    return sorted(n for n, op in OPS.items() if op.outputs == 1 and not op.has("leaf"))


def _random_pattern(draw, ops: list[str], depth: int):
    """A random pattern tree: ops of fixed arity over fresh variables, `depth` levels deep."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return PVar("_")
    op = draw(st.sampled_from(ops))
    arity = OPS[op].arity
    if arity is None:
        return POp(op, (PVar("_"),) * draw(st.integers(1, 3)))
    return POp(op, tuple(_random_pattern(draw, ops, depth - 1) for _ in range(arity)))


@st.composite
def graphs(
    draw, ops: Sequence[str] | None = None, max_depth: int = 3, dtype=np.float64
) -> Instance:
    """A random graph of ops from the table (its `outputs`, with `feeds` for its inputs).

    Ops that cannot fit where they were drawn are redrawn (the instance is filtered out).
    """
    pattern = _random_pattern(draw, _ops_for_graphs(ops), max_depth)
    builder = Builder(draw, dtype)
    try:
        root = builder.build(pattern, None)
    except Reject:
        assume(False)
    assume(root.outputs is None)
    feeds = feeds_for([root], draw(st.integers(0, 2**32 - 1)), builder.domains)
    return Instance(None, [root], feeds)


def instances(rule, ruleset=None, *, finite: bool = True) -> st.SearchStrategy[Instance]:
    """Instances of the rule's pattern that the rule fires on, with feeds and the rewrite
    (`inst.outputs`, `inst.after`, `inst.feeds`). With `finite` (the default) the left side
    is finite on the feeds, so `check_rewrite` has values to judge; `finite=False` also
    gives instances whose left side is NaN or infinite there (undefined, or overflowed).
    Given the rule's RuleSet, nodes an earlier rule of its pass would take are left out."""
    drawn = _instances(rule, ruleset)
    return drawn.filter(_finite_left) if finite else drawn


def _finite_left(inst: Instance) -> bool:
    from ngrules.verification.compare import left_values

    try:
        return all(np.isfinite(v).all() for v in left_values(inst.outputs, inst.feeds))
    except Exception:  # noqa: BLE001 - a left side that cannot run is left to check_rewrite
        return True


def check_rewrite(
    before: Sequence[Node],
    after: Sequence[Node],
    feeds: Mapping[Node | str, np.ndarray] | None = None,
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
    seed: int = 0,
    semantics: str = "strict",
    floats: str = "ieee",
) -> None:
    """Assert that `after` computes what `before` does (both run in float64), judged as the
    verifier judges an instance (`ngrules.verification.compare`).

    feeds: a value per placeholder, keyed by its node or its name; by default random values
    from each input's domain. semantics: "strict" (the default: where `before` is finite,
    `after` must be finite and close; NaN stays NaN, an infinity the same infinity) or
    "refine" (where `before` is NaN or infinite, `after` may be anything). floats: "ieee"
    (the default: an overflow or cancellation on one side only is a difference) or "reals".
    Raises AssertionError with both graphs, the inputs and both results when they differ.
    """
    if semantics not in SEMANTICS:
        raise ValueError(f"semantics must be one of {SEMANTICS}, not {semantics!r}")
    before, after = list(before), list(after)
    if feeds is None:
        feeds = feeds_for(before + after, seed)
    feeds = _by_node(before + after, feeds)
    result = compare(before, after, dict(feeds), rtol, atol, semantics, floats=floats)
    if result.problem is not None:
        cx = Counterexample(None, before, dict(feeds), result.problem, after, result.expected)
        cx.got = result.got
        raise AssertionError(str(cx))


def _by_node(graphs: list[Node], feeds: Mapping[Node | str, np.ndarray]) -> dict:
    """Feeds keyed by name given to every input of that name in either graph."""
    named: dict[str, list[Node]] = {}
    for node in toposort(graphs):
        if node.op in ("Placeholder", "Variable"):
            named.setdefault(node.attrs["name"], []).append(node)
    out: dict[Node, np.ndarray] = {}
    for key, value in feeds.items():
        if not isinstance(key, str):
            out[key] = value
        elif key in named:
            out.update((node, value) for node in named[key])
        else:
            raise ExecutionError(f"a feed names {key!r}, which is not an input of either graph")
    return out
