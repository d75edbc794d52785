"""Random choices of axes, and `Reject` for an attempt that cannot become an instance."""

from __future__ import annotations

from hypothesis import strategies as st

from ngrules.ir.axes import Axes, flatten_groups

AXIS_NAMES = "abcdefghijklmopqrstuvwxyz"  # lowercase: never clashes with opgen's pool (A-F)
MAX_RANK = 5
#: Axis lengths 1-5, with 1 drawn more often (guards about unit axes are common); tensors of
#: rank 3 and more get shorter axes, so that a rank-5 tensor stays small.
LENGTHS = st.sampled_from((1, 1, 2, 3, 4, 5))
SHORT_LENGTHS = st.sampled_from((1, 2, 2, 3))
#: Constants: readable values first (they shrink to 1.0), then many magnitudes, from a tiny eps
#: to a huge scale, and zero.
VALUES = st.sampled_from(
    (1.0, 2.0, 3.0, 4.0, 5.0, 0.5, 0.25, 1.5, 0.1)
    + (1e-3, 1e-5, 1e-8, 1e-12, 10.0, 100.0, 1e4, 1e8, 0.0)
)
NEGATE = st.sampled_from((False, False, True))


class Reject(Exception):
    """This attempt cannot become an instance of the pattern; the message says why."""


# -- axes choices -------------------------------------------------------------------------------
def same_axes(a: Axes, b: Axes) -> bool:
    return a == b and a.lengths == b.lengths


def interleave(draw, keep: Axes, extra: Axes, canonical: Axes | None = None) -> Axes:
    """keep's axes in their order with extra's axes (in a random order) at random places; or,
    as often, the `canonical` layout (the one lowering rules ask for), when given."""
    if canonical is not None and draw(st.booleans()):
        return canonical
    out = list(keep)
    for axis in draw(st.permutations(list(extra))):
        out.insert(draw(st.integers(0, len(out))), axis)
    return Axes(out)


def _groups(draw, n: int) -> list[int]:
    sizes, left = [], n
    while left:
        sizes.append(draw(st.integers(1, left)))
        left -= sizes[-1]
    return sizes


def lengths_for(rank: int):
    """The strategy for the lengths of a tensor of this rank."""
    return LENGTHS if rank <= 2 else SHORT_LENGTHS


def maybe_regroup(draw, axes: Axes) -> Axes:
    """axes as they are, or (a quarter of the time) with some runs flattened: inputs with
    flattened axes, as ngraph's lowering makes them."""
    if len(axes) < 2 or draw(st.sampled_from((True, True, True, False))):
        return axes
    return regroup(draw, axes)


def regroup(draw, axes: Axes) -> Axes:
    """axes with random consecutive runs flattened together."""
    return flatten_groups(axes, _groups(draw, len(axes)))
