"""Comparing the graph before a rewrite with the graph after it: values, then derivatives.

Values are compared in float64 within a tolerance. Non-finite results follow one of two
documented semantics:

- **strict** (the default): where the left side is NaN (undefined) the right side must not be
  finite (NaN, or an infinity reached another way: `log(e^a / -0.0)` against `a - log(-0.0)`),
  where it is +inf or -inf the right side must be the same infinity; except where either side only
  overflowed (an op's finite, nonzero operands gave an infinity: float64 ran out of range, which
  the real numbers the rule speaks of do not), those positions are not judged;
- **refine**: where the left side is not finite (undefined), the right side may be anything, as in
  Alive's refinement: a rewrite may make an undefined result defined, never change a defined one.

Floats: **IEEE** (the default): at finite inputs, both sides are judged as float64 computes
them. A result that overflowed, cancelled or became NaN on one side where the other stays
finite is a difference (`Log(Exp(x)) => x` at x = 1000, `(x + 1) - 1 => x` at x = 1e-12:
both true over the reals). Where float64 ran out of range in either graph (an overflow, or
an underflow to 0), a position finite on one side and not on the other is still judged (only
values both sides computed out of range are not); the absolute tolerance scales with the
result, and cancellation is excused only up to the smaller side's intermediates (`_floor`).
**reals** (`floats="reals"`): as before issue 35, a rule is judged as a statement about real
numbers: positions where float64 ran out of range on either side are not judged, and
cancellation of large intermediates is rounding (CANCELLATION).

Derivatives: both graphs are differentiated (reverse mode, the op table's gradients) with respect
to every input, at inputs of generic values (no ties, no zeros), and must agree too: a term that
hides under the tolerance of a value (`Exp(Exp(x)) + y` with a tiny y) shows in its derivative.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ngrules.errors import NgrulesError
from ngrules.ir.graph import Node, toposort
from ngrules.ir.ops import OPS
from ngrules.verification.instances import as_float64, converted_feeds
from ngrules.verification.instances.assumed import Assumed, generic_within

#: Default tolerance: float64 on both sides, so only reassociation error is allowed.
RTOL, ATOL = 1e-6, 1e-9
SEMANTICS = ("strict", "refine")
#: How floats are judged at finite inputs (see the module docstring).
FLOATS = ("ieee", "reals")
#: Under IEEE, absolute differences below the smallest normal float64 are not judged
#: (`1 / (1 + Exp(740))` is 0 where `Sigmoid(-740)` is 4e-322).
TINY = float(np.finfo(np.float64).tiny)
#: Absolute error allowed per unit of the largest intermediate magnitude (float64 rounding
#: of sums that cancel: `(x + 1e6) - 1e6` is not x to the last digit).
CANCELLATION = 1e-11
#: Ops with a pole at zero: an infinity they give from a zero operand is not an overflow.
_POLES = frozenset({"Divide", "Reciprocal", "Log", "Power"})
#: Elementwise ops that are never zero where their operands are nonzero (a zero is underflow);
#: the positive ones below are never zero at all.
_NEVER_ZERO = frozenset({"Multiply", "Divide", "Square", "Reciprocal", "Power"})
#: Ops positive on every finite operand: a zero is underflow (`Softmax` of `[0, 1e6]`).
_POSITIVE = frozenset({"Exp", "Sigmoid", "Softmax"})


@dataclass
class Comparison:
    """Both graphs' results in float64; `problem` says how they differ (None: they agree)."""

    expected: list[np.ndarray]
    got: list[np.ndarray] | None
    problem: str | None = None
    usable: bool = True


def _where(node: Node, expected: np.ndarray, index) -> str:
    return ", ".join(f"{a.name}={i}" for a, i in zip(node.axes, index)) or "the scalar"


def _judged(expected: np.ndarray, got: np.ndarray, semantics: str, overflow: bool,
            ieee: bool = False):
    """The positions whose result the rewrite must keep: all, but under refinement not where
    the left side is undefined, and not where float64 ran out of range on either side (under
    IEEE, on both sides: a side that stays finite where the other does not is judged)."""
    finite, over = np.isfinite(expected), np.asarray(overflow)
    if ieee:  # out of range: only a side finite where the other is not is judged
        mismatch = finite != np.isfinite(got)
        return (finite & (~over | mismatch)) if semantics == "refine" else (~over | mismatch)
    if semantics == "refine":
        return finite & (np.isfinite(got) | ~over)
    return ~over | (finite & np.isfinite(got))


def absolute_tolerance(expected: np.ndarray, atol: float, ieee: bool) -> float:
    """atol scaled by the largest finite result: at least atol itself over the reals; under
    IEEE the result's own scale (all of `(x + 1) - 1` at x ~ 1e-12 is 1e-16 off), at least
    TINY."""
    finite = np.isfinite(expected)
    largest = float(np.max(np.abs(np.where(finite, expected, 0.0)), initial=0.0))
    return max(atol * largest, TINY) if ieee else atol * max(1.0, largest)


def difference(
    expected: np.ndarray,
    got: np.ndarray,
    node: Node,
    rtol: float = RTOL,
    atol: float = ATOL,
    semantics: str = "strict",
    overflow: bool = False,
    floor: float = 0.0,
    unordered: bool = False,
    undefined: bool = False,
    ieee: bool = False,
) -> str | None:
    """How got differs from expected (None: it does not), in words. The absolute tolerance is
    atol scaled by the largest result, and at least `floor`. With `undefined` (finite inputs),
    an infinity on the left may be NaN on the right: the left side has no real value there
    (`(d - m) / sqrt(v)` at v = 0 is inf, its fold meets inf - inf); an infinity of the other
    sign, or a finite value, is still a difference. `ieee`: judged as float64 computes (the
    module docstring)."""
    if expected.shape != got.shape:
        return f"shapes differ: {expected.shape} before, {got.shape} after"
    expected, got = np.asarray(expected, np.float64), np.asarray(got, np.float64)  # bool masks
    if np.array_equal(got, expected, equal_nan=True):  # what isclose below would find, faster
        return None
    judged = _judged(expected, got, semantics, overflow, ieee)
    scale = max(absolute_tolerance(expected, atol, ieee), floor)
    with np.errstate(all="ignore"):
        close = np.isclose(got, expected, rtol=rtol, atol=scale, equal_nan=True)
        close |= ~judged | (np.isnan(expected) & ~np.isfinite(got))
        if unordered:  # infinite inputs: a rewrite may lose a finite or infinite result
            close |= ~np.isfinite(got) & ~np.isnan(expected)
        if undefined:  # an infinity whose fold meets inf - inf: no real value either side
            close |= np.isinf(expected) & np.isnan(got)
        if close.all():
            return None
        diff = np.where(close, 0.0, np.abs(got - expected))
    diff = np.where(np.isnan(diff) | np.isinf(diff), np.inf, diff)
    where = np.unravel_index(int(np.argmax(diff)), expected.shape)
    return (
        f"max |after - before| = {diff[where]:.6g} at {_where(node, expected, where)} "
        f"(before {expected[where]:.6g}, after {got[where]:.6g})"
    )


def _underflowed(node: Node, value: np.ndarray, args: list) -> bool:
    """An op that is never zero on nonzero (or, if positive, any finite) operands gave a zero."""
    if node.op in _POSITIVE and np.shape(value) == np.shape(args[0]):
        return bool((value == 0).any())
    if node.op not in _NEVER_ZERO or any(np.shape(a) != np.shape(value) for a in args):
        return False
    bases = args[:1] if node.op == "Power" else args  # a^b is 0 only where a is
    nonzero = np.logical_and.reduce([np.asarray(a) != 0 for a in bases])
    return bool(((value == 0) & nonzero).any())


def _overflowed_where_finite(node: Node, value: np.ndarray, args: list) -> bool:
    """An elementwise op gave an infinity at a position where its operands are finite and
    away from a pole, though other positions are not finite (a NaN channel beside an
    overflowing one must not hide the overflow)."""
    if not OPS[node.op].has("elementwise") or any(np.shape(a) != np.shape(value) for a in args):
        return False
    with np.errstate(all="ignore"):
        here = np.logical_and.reduce([np.isfinite(np.asarray(a, np.float64)) for a in args])
        if node.op in _POLES:
            poles = args[:1] if node.op == "Power" else args
            here &= np.logical_and.reduce([np.asarray(a) != 0 for a in poles])
        return bool((np.isinf(np.asarray(value, np.float64)) & here).any())


def _producer(node: Node) -> Node:
    """The op that computed node's value: an `Output` of a multi-output op (a fused kernel)
    is judged as that op, on that op's operands."""
    return node.args[0] if node.op == "Output" else node


def overflowed(before: Sequence[Node], feeds: dict[Node, np.ndarray]) -> bool:
    """Whether float64 ran out of range somewhere in the graph: an op gave an infinity from
    finite operands away from a pole (overflow), or a zero no real number would (underflow,
    as `Exp(-1e6)`)."""
    nodes = [n for n in toposort(before) if n.outputs is None]
    values = dict(zip(nodes, _run(nodes, feeds)))
    for output in nodes:
        node = _producer(output)
        value, args = values[output], [values.get(a) for a in node.args]
        if not args or any(a is None for a in args):
            continue  # an input
        if _overflowed_where_finite(node, value, args):
            return True
        if any(not np.isfinite(a).all() for a in args):
            continue  # an op on values already out of range (or undefined) somewhere
        if _underflowed(node, value, args):
            return True
        if not np.isinf(value).any():  # a NaN is a domain error, not a range one, except
            if np.isnan(value).any() and not OPS[node.op].has("elementwise"):
                return True  # from a sum, dot or convolution of finite terms: inf - inf inside
            continue
        poles = args[:1] if node.op == "Power" else args  # a^b has its pole at a = 0
        if node.op in _POLES and any((a == 0).any() for a in poles):
            continue
        return True
    return False


def left_values(before: Sequence[Node], feeds: dict[Node, np.ndarray]) -> list[np.ndarray]:
    """The graph's results in float64 on the feeds, as `compare` computes them."""
    graphs, memo = as_float64(list(before))
    return _run(graphs, converted_feeds(feeds, memo))


def _run(graphs: Sequence[Node], feeds: dict[Node, np.ndarray]) -> list[np.ndarray]:
    from ngrules.ir.executor import execute

    with np.errstate(all="ignore"):
        return execute(list(graphs), feeds, ignore_unused=True)


def _magnitude(graphs: Sequence[Node], feeds: dict[Node, np.ndarray],
               computed: bool = False) -> float:
    """The largest finite magnitude any node of the graphs takes: cancellation between
    intermediates of that size leaves an error proportional to it. `computed`: of the nodes
    arithmetic computes only (not inputs, constants or views of them)."""
    nodes = [n for n in toposort(graphs) if n.outputs is None and n.dtype.kind == "f"
             and not (computed and (OPS[n.op].has("leaf") or OPS[n.op].has("view")))]
    biggest = 0.0
    for v in _run(nodes, feeds):
        v = np.abs(np.asarray(v, np.float64))
        biggest = max(biggest, float(np.max(np.where(np.isfinite(v), v, 0.0), initial=0.0)))
    return biggest


def compare(
    before: Sequence[Node],
    after: Sequence[Node],
    feeds: dict[Node, np.ndarray],
    rtol: float = RTOL,
    atol: float = ATOL,
    semantics: str = "strict",
    unordered: bool = False,
    floats: str = "ieee",
) -> Comparison:
    """Run both graphs in float64 on the same feeds and compare output by output. With
    `unordered` (for infinite inputs, which stand for values already out of range), a result
    that became NaN or infinite is not judged (which of inf - inf or inf * 0 a sum meets
    first depends on the order of its terms; 1^inf is 1, inf * log(1) is NaN); one that
    became finite where it was not still is (`x * 0 => 0` at x = inf). `floats`: "ieee" or
    "reals" (the module docstring); infinite inputs are judged as over the reals."""
    graphs, memo = as_float64(list(before) + list(after))
    feeds64 = converted_feeds(feeds, memo)
    expected = _run(graphs[: len(before)], feeds64)
    try:
        got = _run(graphs[len(before) :], feeds64)
    except Exception as e:  # the rewritten graph cannot run: that is the finding
        return Comparison(expected, None, f"the rewritten graph fails to run: {e}")
    finite = all(np.isfinite(e).all() for e in expected)
    over = not finite and overflowed(graphs[: len(before)], feeds64)
    if not over and not all(np.isfinite(g).all() for g in got):  # float range, not the rule
        over = overflowed(graphs[len(before) :], feeds64)
    computed = all(np.isfinite(v).all() for v in feeds64.values() if v.dtype.kind == "f")
    ieee = floats == "ieee" and computed
    floor = None  # computed only when the results differ without it (it runs both graphs)
    for i, (e, g, node) in enumerate(zip(expected, got, before)):
        args = (e, g, node, rtol, atol, semantics, over)
        problem = difference(*args, 0.0, unordered, computed, ieee)
        if problem is not None:
            if floor is None:
                floor = _floor(graphs[: len(before)], graphs[len(before):], feeds64, ieee)
            problem = difference(*args, floor, unordered, computed, ieee)
        if problem is not None and ieee and not over:  # values out of range (underflow)?
            over = _out_of_range(graphs[: len(before)], graphs[len(before):], feeds64)
            if over:
                problem = difference(e, g, node, rtol, atol, semantics, over, floor,
                                     unordered, computed, ieee)
        if problem is not None:
            where = f" (output {i})" if len(before) > 1 else ""
            return Comparison(expected, got, f"results differ{where}: {problem}")
    return Comparison(expected, got, usable=finite or semantics == "strict" and not over)


def _out_of_range(left: Sequence[Node], right: Sequence[Node], feeds) -> bool:
    """Whether float64 ran out of its normal range in either graph: an overflow or an
    underflow (`overflowed`), or a subnormal value anywhere, inputs included (it keeps fewer
    digits than any rtol: a batch norm of 5e-324s is noise of either sign)."""
    if overflowed(left, feeds) or overflowed(right, feeds):
        return True
    nodes = [n for n in toposort(list(left) + list(right)) if n.outputs is None
             and n.dtype.kind == "f"]
    for v in _run(nodes, feeds):
        v = np.abs(np.asarray(v, np.float64))
        if ((v > 0) & (v < TINY)).any():
            return True
    return False


def _floor(left: Sequence[Node], right: Sequence[Node], feeds, ieee: bool) -> float:
    """The absolute difference cancellation explains. Over the reals, CANCELLATION of the
    largest intermediate of either side. Under IEEE, of the side whose computed values stay
    smaller: when both sides cancel terms of that size (a fused kernel beside its graph, at
    a result that is 0 over the reals) their results are rounding noise alike, but a side
    that never computes a large value is exact where the other cancelled (`(x + 1) - 1`
    against `x`, `(a + b) + c` against `a + (b + c)` at a = 1e17, b = -1e17, c = 1)."""
    if not ieee:
        return CANCELLATION * _magnitude(list(left) + list(right), feeds)
    return CANCELLATION * min(_magnitude(left, feeds, computed=True),
                              _magnitude(right, feeds, computed=True))


# -- derivatives ---------------------------------------------------------------------------------
def _cost(outputs: Sequence[Node], weights: Sequence[np.ndarray]) -> Node:
    """sum_i Σ(out_i · w_i): a scalar whose gradient mixes every output's adjoint."""
    from ngrules.ir import frontend as F

    total = None
    for out, w in zip(outputs, weights):
        term = F.sum(out * F.constant(w, out.axes, dtype=np.float64), out_axes=())
        total = term if total is None else total + term
    return total


def _gradients(outputs: Sequence[Node], weights, wrt: Sequence[Node]) -> list[Node] | None:
    from ngrules.ir.autodiff import derivs

    try:
        return derivs(_cost(outputs, weights), wrt)
    except NgrulesError:  # an op without a gradient: derivatives cannot be compared
        return None


def generic_feeds(feeds: dict[Node, np.ndarray], seed: int) -> dict[Node, np.ndarray]:
    """Values of the same signs as feeds' (so domains hold), continuous and tie-free."""
    rng = np.random.default_rng(seed)
    out = {}
    for node, value in feeds.items():
        v = np.asarray(value, np.float64)
        sign = np.where(np.signbit(v), -1.0, 1.0)
        out[node] = (sign * rng.uniform(0.3, 1.7, v.shape)).astype(node.dtype)
    return out


def compare_derivatives(
    before: Sequence[Node],
    after: Sequence[Node],
    feeds: dict[Node, np.ndarray],
    seed: int = 0,
    rtol: float = 1e-5,
    atol: float = 1e-11,
    assumed: Assumed = (),
) -> str | None:
    """How d(before)/d(input) and d(after)/d(input) differ for some input (None: they agree or
    cannot be compared: an op without a gradient, or values not finite at generic inputs).
    The generic inputs keep within the rule's `assumed` ranges (see `instances.assumed`)."""
    graphs, memo = as_float64(list(before) + list(after))
    inputs = sorted((k for k in feeds if k in memo and k.op == "Placeholder"
                     and memo[k].dtype.kind == "f"), key=lambda n: n.name)
    if not inputs:  # integer and bool inputs have no derivative
        return None
    values = generic_within(generic_feeds({memo[k]: feeds[k] for k in inputs}, seed), assumed,
                            memo, seed)
    if values is None:
        return None
    values = {**converted_feeds(feeds, memo), **values}
    left, right = graphs[: len(before)], graphs[len(before) :]
    expected = _run(left, values)
    if not all(np.isfinite(e).all() for e in expected):
        return None
    rng = np.random.default_rng(seed + 1)
    weights = [rng.uniform(0.5, 1.5, e.shape) for e in expected]
    wrt = [memo[k] for k in inputs]
    dl, dr = _gradients(left, weights, wrt), _gradients(right, weights, wrt)
    if dl is None or dr is None:
        return None
    gl, gr = _run(dl, values), _run(dr, values)
    for x, a, b, left_d, right_d in zip(inputs, gl, gr, dl, dr):
        if not np.isfinite(a).all():
            continue
        # cancellation in this derivative's own graph (a saturated softmax scaled by 1e5 leaves
        # 1e-11 of rounding), not in the values: a hidden `+ y` still shows
        problem = difference(a, b, x, rtol, atol)
        if problem is not None:  # a larger floor only widens the tolerance: computed if needed
            floor = CANCELLATION * _magnitude([left_d, right_d], values)
            problem = difference(a, b, x, rtol, atol, floor=floor)
        if problem is not None:
            gone = "" if _depends(right, memo[x]) else f" (the replacement no longer uses {x.name})"
            return f"derivatives with respect to {x.name} differ{gone}: {problem}"
    return None


def _depends(outputs: Sequence[Node], leaf: Node) -> bool:
    return leaf in set(toposort(outputs))
