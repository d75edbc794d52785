"""Plans for convolution and pooling: their geometry solved from what is known, not drawn.

A window op's output lengths follow from its input lengths, window, padding, strides and
dilation (`out = (in + 2 pad - (dil (window - 1) + 1)) // stride + 1`). When the pattern
already fixes some of them (the input is a variable built before, the filters are shared by
two convolutions, a guard or a declared op's body fixes `groups`, `strides` or the window),
the plan enumerates the few small geometries per spatial axis that give the output lengths
asked for from what is fixed, and draws one of those: a solve over small domains, where a
free draw would almost never line up.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
from hypothesis import strategies as st

from ngrules.ir.axes import Axes, Axis
from ngrules.verification.instances.choices import Reject

if TYPE_CHECKING:
    from ngrules.verification.instances.builder import Builder

#: The small values tried per spatial axis (window, padding, stride, dilation).
WINDOWS, PADS, STRIDES, DILATIONS = (1, 2, 3), (0, 0, 1), (1, 1, 2), (1, 1, 2)


def _fixed(b: Builder, key: str, i: int) -> int | None:
    value = b.fixing.get(key)
    return None if value is None else int(np.asarray(value).reshape(-1)[i])


def _options(b: Builder, i: int, out: int, length: int | None, window: int | None,
             dilated: bool) -> list[tuple[int, int, int, int, int]]:
    """(input length, window, pad, stride, dilation) giving `out` positions along axis i."""
    found = []
    choices = (
        [window] if window is not None else (_fixed(b, "window", i),) if "window" in b.fixing
        else WINDOWS,
        [_fixed(b, "padding", i)] if "padding" in b.fixing else sorted(set(PADS)),
        [_fixed(b, "strides", i)] if "strides" in b.fixing else sorted(set(STRIDES)),
        [_fixed(b, "dilation", i)] if "dilation" in b.fixing else
        sorted(set(DILATIONS)) if dilated else [1],
    )
    for k, p, s, d in itertools.product(*choices):
        span = d * (k - 1) + 1
        if not dilated and p >= k:  # a pooling window is never all padding
            continue
        lows = [length] if length is not None else range(1, (out - 1) * s + span + 1)
        for n in lows:
            if n >= 1 and (n + 2 * p - span) >= 0 and (n + 2 * p - span) // s + 1 == out:
                found.append((n, k, p, s, d))
    return found


def _solve(b: Builder, want: Axes, x: Axes | None, window: list | None, dilated: bool):
    """Per spatial axis, one drawn (input length, window, pad, stride, dilation)."""
    picks = []
    for i in range(3):
        found = _options(b, i, want[1 + i].length, x[1 + i].length if x is not None else None,
                         window[i] if window is not None else None, dilated)
        if not found:
            raise Reject(f"no geometry gives {want[1 + i].length} positions along axis {i}")
        picks.append(b.draw(st.sampled_from(found)))
    return picks


def _check5(op: str, *axes) -> None:
    for ax in axes:
        if ax is not None and len(ax) != 5:
            raise Reject(f"{op} needs 5 axes, got {ax!r}")


def plan_convolution(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    """Inputs (C, D, H, W, N) and filters (C/G, T, R, S, K) for result (K, M, P, Q, N): the
    known input or filters kept, the groups and geometry solved to fit them."""
    fx, fw = forced
    _check5("Convolution", want, fx, fw)
    k, n = want[0], want[4]
    if fw is not None and fw[4].length != k.length or fx is not None and fx[4] != n:
        raise Reject(f"Convolution cannot give {want!r} from {fx!r} and {fw!r}")
    groups = _groups(b, k.length, fx, fw)
    picks = _solve(b, want, fx, list(fw.lengths[1:4]) if fw is not None else None, True)
    if fx is None:
        width = fw[0].length * groups if fw is not None else b.draw(st.integers(1, 2)) * groups
        channel = fw[0] if fw is not None and groups == 1 else Axis(b.fresh(1)[0].name, width)
        fx = Axes([channel, *(Axis(a.name, p[0]) for a, p in zip(b.fresh(3), picks)), n])
    if fw is None:
        if fx[0].length % groups:
            raise Reject(f"{groups} groups do not divide the channel {fx[0]!r}")
        channel = fx[0] if groups == 1 else Axis(b.fresh(1)[0].name, fx[0].length // groups)
        taps = [Axis(a.name, p[1]) for a, p in zip(b.fresh(3), picks)]
        fw = Axes([channel, *taps, Axis(b.fresh(1)[0].name, k.length)])
    attrs = {"axes": want, "groups": groups}
    for j, key in enumerate(("padding", "strides", "dilation"), start=2):
        attrs[key] = np.array([p[j] for p in picks], np.int64)
    return [fx, fw], attrs


def _groups(b: Builder, k: int, fx: Axes | None, fw: Axes | None) -> int:
    """A number of groups dividing K that the known channels allow (a fixed one if given)."""
    fits = [int(b.fixing["groups"])] if "groups" in b.fixing else [1, 1, 2, 3]
    fits = [g for g in fits if g >= 1 and k % g == 0]
    if fx is not None and fw is not None:
        fits = [g for g in fits if fx[0].length == fw[0].length * g
                and (g > 1 or fx[0].name == fw[0].name)]
    elif fx is not None:
        fits = [g for g in fits if fx[0].length % g == 0]
    if not fits:
        raise Reject("no number of groups fits the channels")
    return b.draw(st.sampled_from(fits))


def plan_pooling(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    """Input (C, D, H, W, N) for result (C, M, P, Q, N), the window and geometry solved."""
    (fx,) = forced
    _check5("Pooling", want, fx)
    if fx is not None and (fx[0] != want[0] or fx[4] != want[4]):
        raise Reject(f"Pooling cannot give {want!r} from {fx!r}")
    picks = _solve(b, want, fx, None, False)
    if fx is None:
        fx = Axes([want[0], *(Axis(a.name, p[0]) for a, p in zip(b.fresh(3), picks)), want[4]])
    mode = b.fixing.get("mode") or b.draw(st.sampled_from(("max", "avg")))
    attrs = {"axes": want, "mode": mode,
             "window": np.array([p[1] for p in picks], np.int64)}
    for j, key in enumerate(("padding", "strides"), start=2):
        attrs[key] = np.array([p[j] for p in picks], np.int64)
    return [fx], attrs
