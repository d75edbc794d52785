"""Plans: an op's argument axes and attributes for given output axes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from hypothesis import strategies as st

from ngrules.ir.axes import Axes, Axis
from ngrules.ir.ops import OPS
from ngrules.lang.syntax import PNamed, POp, PVar
from ngrules.verification.instances.choices import Reject, interleave, regroup, same_axes
from ngrules.verification.instances.windows import plan_convolution, plan_pooling

# -- plans: an op's argument axes and attributes for given output axes ---------------------------
Plan = Callable[["Builder", Axes, list], tuple[list[Axes], dict]]

if TYPE_CHECKING:  # the builder calls the plans; they only take it as an argument
    from ngrules.verification.instances.builder import Builder


def _plan_elementwise(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    return [want] * len(forced), {}


def _plan_transpose(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    return [Axes(want[::-1])], {}


def _plan_reorder(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    arg = forced[0] if forced[0] is not None else Axes(b.draw(st.permutations(list(want))))
    return [arg], {"axes": want}


def _plan_broadcast(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    arg = forced[0]
    if arg is None:
        kept = [a for a in want if b.draw(st.booleans())]
        arg = Axes(b.draw(st.permutations(kept)))
    return [arg], {"axes": want}


def _plan_flatten(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    return [forced[0] if forced[0] is not None else Axes(want.leaves())], {"axes": want}


def _plan_unflatten(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    return [forced[0] if forced[0] is not None else regroup(b.draw, want)], {"axes": want}


def _plan_reduce(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    arg = forced[0]
    if arg is None:
        count = b.draw(st.sampled_from((1, 1, 2, 2, 3, 4)))  # mostly 1-2, up to rank 4 and more
        red = b.fresh(min(count, 4 - min(len(want), 2)))
        arg = interleave(b.draw, want, red, want + red)
    red = Axes(b.draw(st.permutations(list(arg - want))))
    return [arg], {"reduction_axes": red}


def _plan_softmax(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    """The operand has the output's axes; a non-empty subset of them is normalised over."""
    if not len(want):
        raise Reject("Softmax needs at least one axis to normalise over")
    norm = [a for a in want if b.draw(st.booleans())] or [want[0]]
    return [want], {"normalization_axes": Axes(norm)}


def _plan_dot(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    fx, fy = forced
    if fx is not None and fy is not None:
        return [fx, fy], {}
    if fx is not None:
        red = fx - want
        return [fx, interleave(b.draw, want[len(fx - red) :], red)], {}
    if fy is not None:
        red = fy - want
        return [interleave(b.draw, want[: len(want) - len(fy - red)], red), fy], {}
    k = b.draw(st.integers(0, len(want)))
    red = b.fresh(b.draw(st.integers(0, 3)))
    x_out, y_out = want[:k], want[k:]
    return [
        interleave(b.draw, x_out, red, x_out + red),
        interleave(b.draw, y_out, red, red + y_out),
    ], {}


def _plan_dot_low(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    if len(want) > 2:
        raise Reject(f"DotLowDimension cannot have the {len(want)} axes {want!r}")
    k = b.fresh(1)
    if len(want) == 2:
        return [want[:1] + k, k + want[1:]], {"axes": want}
    if len(want) == 1 and b.draw(st.booleans()):
        return [k, k + want], {"axes": want}
    return [want + k, k], {"axes": want}


def _plain_position(b: Builder, want: Axes, shortest: int = 1) -> int:
    """A position of want holding a plain (not flattened) axis of at least `shortest`."""
    fits = [i for i, a in enumerate(want) if not a.is_flattened and a.length >= shortest]
    if not fits:
        raise Reject(f"no plain axis of length >= {shortest} in {want!r} to slice or join at")
    return b.draw(st.sampled_from(fits))


def _replaced(want: Axes, pos: int, axis) -> Axes:
    return Axes(want[:pos]) + Axes((axis,)) + Axes(want[pos + 1 :])


def _plan_slice(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    pos = _plain_position(b, want)
    part = want[pos]
    if b.draw(st.sampled_from((False, False, False, True))):  # the whole axis, kept
        return [want], {"position": pos, "start": 0, "stop": part.length, "axis": part}
    full = b.fresh(1)[0]
    full = type(full)(full.name, part.length + b.draw(st.integers(0, 2)))
    start = b.draw(st.integers(0, full.length - part.length))
    attrs = {"position": pos, "start": start, "stop": start + part.length, "axis": part}
    return [_replaced(want, pos, full)], attrs


def _concat_positions(b: Builder, want: Axes, forced: list) -> list[int]:
    """Positions of want a concat may join at: plain, long enough for every part, and where
    the parts already built line up with want everywhere else (or the one a guard fixes)."""
    n = len(forced)
    fits = [i for i, a in enumerate(want) if not a.is_flattened and a.length >= n]
    if "position" in b.fixing:
        fits = [i for i in fits if i == int(b.fixing["position"])]
    for f in forced:
        if f is not None:
            fits = [i for i in fits if len(f) == len(want) and same_axes(
                Axes(f[:i]) + Axes(f[i + 1 :]), Axes(want[:i]) + Axes(want[i + 1 :]))]
    if not fits:
        raise Reject(f"no position of {want!r} lines up with the parts {forced!r}")
    return fits


def _plan_concat(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    """Parts along a drawn position: the parts already built keep their lengths, the others
    share what is left (evenly half of the time, as parts of shared filters need)."""
    pos = b.draw(st.sampled_from(_concat_positions(b, want, forced)))
    known = [f[pos] if f is not None else None for f in forced]
    left = want[pos].length - sum(a.length for a in known if a is not None)
    free = sum(a is None for a in known)
    if left < free or (free == 0 and left != 0):
        raise Reject(f"the parts {forced!r} cannot join into {want[pos]!r}")
    cuts = []
    if free and left % free == 0 and b.draw(st.booleans()):
        cuts = [left // free] * free
    else:
        for i in range(free - 1):
            cuts.append(b.draw(st.integers(1, left - sum(cuts) - (free - 1 - i))))
        cuts += [left - sum(cuts)] if free else []
    fresh = iter(type(a)(a.name, k) for a, k in zip(b.fresh(free), cuts))
    parts = [a if a is not None else next(fresh) for a in known]
    return [_replaced(want, pos, p) for p in parts], {"axis": want[pos], "position": pos}


def _plan_pad(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    """The operand's axes are the output's, each shorter by its padding (0-2 on each side,
    leaving at least one element; none on a flattened axis): a pad fits any position, as
    under a convolution's or pooling's 5 axes, where its generator's samples rarely do."""
    if not len(want):
        raise Reject("Pad needs at least one axis to pad")
    pads = []
    for i, a in enumerate(want):
        if forced[0] is not None:
            extra = a.length - forced[0][i].length if i < len(forced[0]) else -1
            lo = b.draw(st.integers(0, extra)) if extra >= 0 else -1
            pads.append((lo, extra - lo))
        elif a.is_flattened:
            pads.append((0, 0))
        else:
            lo = b.draw(st.integers(0, min(2, a.length - 1)))
            pads.append((lo, b.draw(st.integers(0, min(2, a.length - 1 - lo)))))
    if min(min(p) for p in pads) < 0 or (forced[0] is not None and len(forced[0]) != len(want)):
        raise Reject(f"Pad cannot give {want!r} from {forced[0]!r}")
    arg = Axes(a if lo + hi == 0 else Axis(a.name, a.length - lo - hi)
               for a, (lo, hi) in zip(want, pads))
    return [arg], {"paddings": np.array(pads, np.int64), "axes": want}


def relabelled(b: Builder, want: Axes) -> list:
    """want's axes, or (one time in two) with those of equal lengths >= 2 rotated among
    their positions: the operand of an op whose `axes` attribute names its result position by
    position (TensorSlice, AxesCast) may hold the result's axes in another order, and such an
    op then transposes. A guard that checks names but not order (`t.axes == x.axes` where
    `t.axes == b.axes & x.axes` is meant) is wrong only there."""
    out = list(want)
    if len(want) < 2 or b.draw(st.booleans()):
        return out
    groups: dict[int, list[int]] = {}
    for i, a in enumerate(want):
        if a.length >= 2:
            groups.setdefault(a.length, []).append(i)
    for at in (g for g in groups.values() if len(g) >= 2):
        turn = b.draw(st.integers(1, len(at) - 1))  # a rotation: never the order itself
        for i, j in zip(at, at[turn:] + at[:turn]):
            out[i] = want[j]
    return out


def _plan_tensor_slice(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    """An operand with the output's axes (or the same ones relabelled, `relabelled`), each
    kept whole or a part of a longer one, and (three times in four) one more axis of length 1
    that an index drops: the view an imported convolution's output is read through, which the
    op's generator rarely draws."""
    if forced[0] is not None:
        raise Reject("TensorSlice is planned only for an operand not built yet")
    drop = b.draw(st.integers(0, len(want))) if b.draw(st.integers(0, 3)) else None
    axes, rows, named = [], [], relabelled(b, want)
    parts = b.draw(st.booleans())  # else every axis whole, as an operand built already has
    for i, a in enumerate([*want, None]):
        if i == drop:
            axes.append(Axis(b.fresh(1)[0].name, 1))
            rows.append((0, 1, 0))
        if a is None:
            break
        extra = 0 if a.is_flattened or not parts else b.draw(st.sampled_from((0, 0, 1, 2)))
        start = b.draw(st.integers(0, extra))
        axes.append(named[i] if not extra else Axis(b.fresh(1)[0].name, a.length + extra))
        rows.append((start, start + a.length, 1))
    return [Axes(axes)], {"slices": np.array(rows, np.int64), "axes": want}


def _plan_axes_cast(b: Builder, want: Axes, forced: list) -> tuple[list[Axes], dict]:
    """An operand of the output's lengths: the one built already, new axes (a rename, as the
    op's generator draws), or the output's own axes relabelled (`relabelled`)."""
    if forced[0] is not None:
        return [forced[0]], {"axes": want}
    named = relabelled(b, want)
    if named == list(want):
        named = [a if a.is_flattened else Axis(n.name, a.length)
                 for a, n in zip(want, b.fresh(len(want)))]
    return [Axes(named)], {"axes": want}


PLANS: dict[str, Plan] = {
    "Pad": _plan_pad,
    "Slice": _plan_slice,
    "TensorSlice": _plan_tensor_slice,
    "AxesCast": _plan_axes_cast,
    "Concat": _plan_concat,
    "Transpose": _plan_transpose,
    "ReorderAxes": _plan_reorder,
    "Broadcast": _plan_broadcast,
    "Flatten": _plan_flatten,
    "Unflatten": _plan_unflatten,
    "Sum": _plan_reduce,
    "Max": _plan_reduce,
    "Min": _plan_reduce,
    "Prod": _plan_reduce,
    "Softmax": _plan_softmax,
    "Convolution": plan_convolution,
    "Pooling": plan_pooling,
    "Dot": _plan_dot,
    "DotLowDimension": _plan_dot_low,
}


#: Ops whose output has at least one axis (the one sliced, joined or flattened).
NEEDS_AN_AXIS = frozenset({"Slice", "Concat", "Flatten", "Pad"})


#: Ops whose output rank is fixed whatever their operands.
FIXED_RANKS = {"Convolution": 5, "Pooling": 5}
#: Ops whose output has their (first) operand's rank.
_SAME_RANK = frozenset({"Concat", "Pad", "Slice", "ReorderAxes", "Transpose"})


def pattern_rank(p) -> int | None:
    """The rank a pattern position must have, when its ops fix it (a convolution's 5, passed
    up through elementwise ops, concats and declared ops' bodies); None when free."""
    from ngrules.verification.instances.declared import inline

    if isinstance(p, PNamed):
        return pattern_rank(p.pattern)
    if isinstance(p, PVar):
        return FIXED_RANKS.get(p.kind)
    if not isinstance(p, POp) or p.optional:
        return None
    if p.op in FIXED_RANKS:
        return FIXED_RANKS[p.op]
    if OPS[p.op].has("elementwise") or p.op in _SAME_RANK:
        return next((r for r in map(pattern_rank, p.args) if r is not None), None)
    body = inline(p.op, p.args)
    return pattern_rank(body.root) if body is not None else None


def op_at(p) -> str:
    """The op a position's node is known to be ("" if none): for the shape of free axes."""
    if isinstance(p, PNamed):
        return op_at(p.pattern)
    if isinstance(p, POp) and not p.optional:
        return p.op
    return p.kind if isinstance(p, PVar) and p.kind in OPS else ""


def plan_for(op: str) -> Plan | None:
    """How to choose op's argument axes for given output axes (None: use the op's generator)."""
    if op in PLANS:
        return PLANS[op]
    return _plan_elementwise if OPS[op].has("elementwise") else None
