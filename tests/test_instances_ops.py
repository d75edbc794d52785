"""Every op of the op table can be built at a pattern position: as the root, and below an
elementwise op (where its output axes are fixed from above). Driven by the table alone, so an
op added to it is covered without touching the instance builder."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ngrules.ir.ops import OPS
from ngrules.lang.syntax import POp, PVar
from ngrules.verification.instances import Builder, Reject

#: Leaves are built from variables and literals, Output through its multi-output argument.
BUILT_ELSEWHERE = {"Placeholder", "Constant", "Variable"}
OPS_UNDER_TEST = sorted(op for op in OPS if op not in BUILT_ELSEWHERE)


def _pattern(op: str):
    d = OPS[op]
    if op == "Output":
        return POp("Output", (PVar("_", "multi_output"),))
    if d.has("multi_output"):
        return POp("Output", (POp(op, (PVar("_"),) * (d.arity or 2)),))
    return POp(op, (PVar("_"),) * (d.arity if d.arity is not None else 2))


class _Built(BaseException):
    """Stops the search at the first instance built (hypothesis lets a BaseException through)."""


def _built(pattern, parent: str | None) -> tuple[int, list[str]]:
    root = POp(parent, (pattern,)) if parent else pattern  # the position's axes come from above
    made, reasons = [], []

    @settings(max_examples=60, database=None, deadline=None, derandomize=True,
              phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
    @given(st.data())
    def attempt(data):
        b = Builder(data.draw, np.float64, roots=(root,))
        try:
            node = b.build(root, None)
        except Reject as r:
            reasons.append(str(r))
            return
        made.append(node)
        raise _Built

    with contextlib.suppress(_Built):
        attempt()
    return len(made), reasons[:3]


@pytest.mark.parametrize("op", OPS_UNDER_TEST)
def test_every_op_is_buildable_as_the_root_and_below_an_elementwise_op(op):
    pattern = _pattern(op)
    count, why = _built(pattern, None)
    assert count > 0, f"{op} as the root: never built; {why}"
    # below Negative, or as the condition of a Select when the op gives bool tensors
    count, why = _built(pattern, "Negative")
    if not count:
        count, why = _built(POp("Select", (pattern, PVar("a"), PVar("b"))), None)
    assert count > 0, f"{op} below an elementwise op: never built; {why}"
