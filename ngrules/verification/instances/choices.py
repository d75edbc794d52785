"""Random choices of axes, and `Reject` for an attempt that cannot become an instance."""

from __future__ import annotations

from hypothesis import strategies as st

from ngrules.ir.axes import Axes, flatten_groups

AXIS_NAMES = "abcdefghijklmopqrstuvwxyz"  # lowercase: never clashes with opgen's pool (A-F)
MAX_RANK = 3
#: Axis lengths 1-5, with 1 drawn more often (guards about unit axes are common).
LENGTHS = st.sampled_from((1, 1, 2, 3, 4, 5))
VALUES = st.sampled_from((1.0, 2.0, 3.0, 4.0, 5.0, 0.5, 0.25, 1.5, 0.1))
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


def regroup(draw, axes: Axes) -> Axes:
    """axes with random consecutive runs flattened together."""
    return flatten_groups(axes, _groups(draw, len(axes)))
