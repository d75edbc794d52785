"""Instances in the rule's own dtypes: float32 and float16 besides float64.

A rule may be right in float64 and wrong in a narrower float: a constant it introduces
overflows float16 (`x * 1e-5 => x / 100000`: 1e5 is inf there, the quotient 0), a folded
constant does (`(x * 300) * 300 => x * 90000`), or a loss scale (`x * 65536`). Once a rule
passes its float64 instances, a few of them (the smallest `MAX_INSTANCES`) are laid out again
in float32 and float16: every float leaf, constant and dtype attribute in the instance's own
float dtype takes the narrower one (a `Cast` to float16 inside a float64 graph stays a cast to
float16), and the rule rewrites that graph itself. The rule's own dtypes are those it still
fires in: a rule whose guard asks for float64 (or whose pattern fixes a dtype) is not run in
float16; an instance built in float32 (a guard asks for it) runs in float32 itself too, where
the float64 run widened it.

Both sides then run in the narrow dtype on inputs representable in it (the instance's own
inputs rounded to it, or generic ones of the same signs where those overflow it), beside a
reference: the float64 instance on the same inputs (with the rule's constants exact). A
position is judged where the left side computes the reference within the dtype's tolerance
(`TOLERANCES`): where the original graph itself overflowed, underflowed, cancelled or flipped
a comparison in the narrow dtype, a rewrite is free to differ. There the right side must be
within the tolerance too; else the rule is wrong in that dtype. Where an intermediate of the
rewrite ran out of the narrow dtype's range (an op gave inf, or a sum NaN, from finite operands:
`mean * s` of a folded batch norm in float16) the run is out of range, as in float64, and not
judged; a constant the rewrite introduces that does not fit the dtype is no such overflow (it
is inf before any op runs), so `x * 1e-5 => x / 100000` stays wrong in float16. Derivatives
are not compared.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ngrules.errors import NgrulesError
from ngrules.ir.executor import execute
from ngrules.ir.graph import Node, make_node, toposort
from ngrules.ir.ops import OPS
from ngrules.verification.compare import overflowed
from ngrules.verification.instances import Instance, as_float64, converted_feeds
from ngrules.verification.instances.assumed import broken
from ngrules.verification.instances.sampling import rewrite_instance
from ngrules.verification.verdicts import Counterexample


@dataclass(frozen=True)
class Tolerance:
    """|after - reference| <= rtol·|reference| + atol + cancellation·(largest operand of a
    sum): rounding of a few ops in the dtype, and of sums of large terms that cancel."""

    rtol: float
    atol: float
    cancellation: float


#: Per narrow dtype: about 100 units in the last place relative (float32's eps is 1.2e-7,
#: float16's 9.8e-4), an absolute part of a few of its smallest subnormals (so a product of
#: 1e-5 in float16 is still judged relatively), and cancellation of ~10 eps of the sums' terms.
TOLERANCES = {
    np.dtype(np.float32): Tolerance(1e-5, 1e-44, 1e-6),
    np.dtype(np.float16): Tolerance(1e-2, 2.4e-7, 1e-2),
}
#: The narrow dtypes instances run in, and how many instances per rule.
DTYPES = tuple(TOLERANCES)
MAX_INSTANCES = 2
#: Magnitudes of the generic inputs (0.3-1.7 times these): small ones meet a folded constant
#: that overflows (`(x * 300) * 300 => x * 90000` is finite before only for |x| < 0.73).
SCALES = (1.0, 2.0**-6)
#: Ops where terms add up (their operands' magnitude bounds a cancellation's rounding).
_ADDITIVE = frozenset({"Add", "Subtract"})


def source_dtype(inst: Instance) -> np.dtype | None:
    """The instance's own float dtype: its float placeholders' (else constants'); None if it
    has no float input (an integer or bool rule: nothing to narrow)."""
    nodes = toposort(inst.outputs)
    for ops in (("Placeholder", "Variable"), ("Constant",)):
        for node in nodes:
            if node.op in ops and node.dtype.kind == "f":
                return node.dtype
    return None


def relaid(outputs: Sequence[Node], source: np.dtype, target: np.dtype):
    """The graph with every float leaf, constant and dtype attribute in `source` in `target`
    (other dtypes kept), and old -> new nodes. Raises NgrulesError if an op refuses it."""
    memo: dict[Node, Node] = {}
    for node in toposort(outputs):
        attrs = dict(node.attrs)
        if node.op == "Constant" and node.dtype == source:
            with np.errstate(all="ignore"):
                attrs["value"] = np.asarray(attrs["value"]).astype(target)
        elif "dtype" in attrs and attrs["dtype"] is not None and np.dtype(attrs["dtype"]) == source:
            attrs["dtype"] = target
        memo[node] = make_node(node.op, [memo[a] for a in node.args], **attrs)
    return [memo[o] for o in outputs], memo


def _narrow_feeds(inst: Instance, target: np.dtype, seed: int) -> Iterator[dict]:
    """Inputs in the narrow dtype, keyed by the instance's nodes: its own rounded to it
    (unless an element overflows it or a nonzero one vanishes), then generic ones of the
    same signs at each of `SCALES`; each within the rule's assumptions once rounded."""
    from ngrules.verification.compare import generic_feeds

    floats = {k: v for k, v in inst.feeds.items() if np.asarray(v).dtype.kind == "f"}
    own = {k: _rounded(v, target) for k, v in floats.items()}
    fits = all(np.array_equal(np.isfinite(own[k]), np.isfinite(v))
               and not ((own[k] == 0) & (np.asarray(v) != 0)).any() for k, v in floats.items())
    generic = generic_feeds(floats, seed)
    scaled = [{k: _rounded(v * scale, target) for k, v in generic.items()} for scale in SCALES]
    for chosen in ([own] if fits else []) + scaled:
        feeds = {**inst.feeds, **chosen}
        if not inst.assumed or broken(inst.assumed, feeds) is None:
            yield feeds


def _rounded(value, target: np.dtype) -> np.ndarray:
    """value rounded to target, kept in the instance's dtype (for the reference)."""
    v = np.asarray(value)
    with np.errstate(all="ignore"):
        return v.astype(target).astype(v.dtype)


def _run(outputs: Sequence[Node], feeds) -> list[np.ndarray]:
    with np.errstate(all="ignore"):
        return [np.asarray(r, np.float64) for r in execute(list(outputs), feeds,
                                                            ignore_unused=True)]


def _sum_magnitude(outputs: Sequence[Node], feeds) -> float:
    """The largest finite operand of an addition in the graph (run in float64)."""
    adds = [n for n in toposort(outputs) if n.op in _ADDITIVE or not (
        OPS[n.op].has("elementwise") or OPS[n.op].has("leaf") or n.outputs is not None)]
    operands = list({a for n in adds for a in n.args if a.outputs is None})
    biggest = 0.0
    for v in _run(operands, feeds) if operands else ():
        v = np.abs(v)
        biggest = max(biggest, float(np.max(np.where(np.isfinite(v), v, 0.0), initial=0.0)))
    return biggest


@dataclass
class _Narrow:
    """One instance laid out in a narrow dtype and rewritten there by the rule."""

    inst: Instance
    target: np.dtype
    before: list[Node]
    after: list[Node]
    memo: dict[Node, Node]

    def difference(self, feeds) -> tuple[str, list, list] | None:
        """Where the rewrite in the narrow dtype leaves the reference that the left side
        keeps: (how, left side's results, right side's results); None if nowhere."""
        tol = TOLERANCES[self.target]
        ref_graph, ref_memo = as_float64(self.inst.outputs)
        ref_feeds = converted_feeds(feeds, ref_memo)
        reference = _run(ref_graph, ref_feeds)
        narrow = converted_feeds(feeds, self.memo)
        if overflowed(self.after, narrow):
            return None  # an intermediate of the rewrite ran out of the dtype's range (as in
            # float64: out of range, not wrong); a constant that does not fit is no overflow
        left, right = _run(self.before, narrow), _run(self.after, narrow)
        floor = tol.cancellation * max(_sum_magnitude(ref_graph, ref_feeds),
                                       _sum_magnitude(self.after, narrow))
        for i, (ref, a, b) in enumerate(zip(reference, left, right)):
            with np.errstate(all="ignore"):
                allowed = tol.rtol * np.abs(ref) + tol.atol + floor
                kept = np.isfinite(ref) & (np.abs(a - ref) <= allowed)
                off = kept & ~(np.abs(b - ref) <= allowed)
            if off.any():
                at = np.unravel_index(int(np.argmax(off)), np.shape(ref))
                where = f" (output {i})" if len(reference) > 1 else ""
                how = (f"results differ in {self.target}{where}: before {a[at]:.6g}, after "
                       f"{b[at]:.6g} (float64 {ref[at]:.6g}; allowed ±{allowed[at]:.3g}, "
                       f"{self.target}'s tolerance)")
                return how, left, right
        return None


def _narrowed(inst: Instance, target: np.dtype) -> _Narrow | None:
    """The instance in `target`, rewritten by the rule; None where it is not one of the
    rule's dtypes (the graph cannot be laid out in it, or the rule does not fire on it)."""
    source = source_dtype(inst)
    if source is None or source.itemsize < target.itemsize:  # never widened
        return None
    try:
        before, memo = relaid(inst.outputs, source, target)
    except (NgrulesError, ValueError, TypeError):
        return None
    laid = rewrite_instance(inst.rule, before, {})
    if not laid.fired or laid.error is not None or laid.after is None:
        return None
    after = laid.after if laid.stop == "fixpoint" else laid.step
    return _Narrow(inst, target, before, after, memo)


@dataclass
class DtypeCheck:
    """What `narrow_dtype_check` found: a counterexample or None, and the narrow dtypes the
    rule ran in (its own: those it fired in)."""

    counterexample: Counterexample | None
    dtypes: tuple[str, ...]

    def __str__(self) -> str:
        return f"also run in {', '.join(self.dtypes)}" if self.dtypes else ""


def narrow_dtype_check(instances: Sequence[Instance], seed: int = 0) -> DtypeCheck:
    """The first narrow-dtype run of the (smallest) instances where the rewrite changes a
    result the left side computes right in that dtype, as a counterexample (None if none)."""
    chosen = sorted((i for i in instances if i.after is not None),
                    key=lambda i: len(toposort(i.outputs)))[:MAX_INSTANCES]
    ran: list[str] = []
    for inst in chosen:
        for target in DTYPES:
            narrow = _narrowed(inst, target)
            if narrow is None:
                continue
            if str(target) not in ran:
                ran.append(str(target))
            for feeds in _narrow_feeds(inst, target, seed):
                found = narrow.difference(feeds)
                if found is not None:
                    how, left, right = found
                    cx = Counterexample(inst.rule, narrow.before,
                                        converted_feeds(feeds, narrow.memo), how,
                                        narrow.after, left, right)
                    return DtypeCheck(cx, tuple(ran))
    return DtypeCheck(None, tuple(sorted(ran, reverse=True)))
