"""Proof in IEEE floating point (z3's FP theory) for small pointwise rules.

A proof over the reals says nothing of `x * 0` at x = inf or of `(x + y) - y` at y = 1e17. For
a rule that acts pointwise, its rank-0 instances are encoded here as z3 floating-point terms
with numpy's semantics (round to nearest even, NaN propagated by `maximum`, comparisons false
on NaN) in float16, float32 and float64, and z3 is asked for inputs where the results differ:
where the left side is NaN the right side must not be finite, where it is an infinity the
same infinity, elsewhere equal (+0 and -0 alike; under refinement, only where the left side
is finite). `unsat` in every format is a proof for what runs; any other answer leaves the
rule to the real-number proof (`proved-reals`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import z3

from ngrules.ir.graph import Node, toposort
from ngrules.verification.instances import Instance
from ngrules.verification.prove.budget import Budget, BudgetSpent, check_size
from ngrules.verification.prove.cpustop import CpuStop

#: z3's resource limit per query (deterministic, unlike a timeout: a verdict must not depend
#: on the machine's load); float64 `x * 2 => x + x` takes about 2.5 million.
RLIMIT = 4_000_000
FORMATS = {"float16": z3.Float16, "float32": z3.Float32, "float64": z3.Float64}
RNE = z3.RNE()


def _flag(cond: Callable) -> Callable:
    def enc(sort, a, b, attrs):
        return z3.If(cond(a, b), z3.FPVal(1.0, sort), z3.FPVal(0.0, sort))

    return enc


def _nan_or(a, b, value, sort):
    return z3.If(z3.Or(z3.fpIsNaN(a), z3.fpIsNaN(b)), z3.fpNaN(sort), value)


def _relu(sort, x, attrs):
    return z3.If(z3.fpGT(x, z3.FPVal(0.0, sort)), x,
                 z3.fpMul(RNE, x, z3.FPVal(float(attrs["slope"]), sort)))


def _relu_bprop(sort, d, x, attrs):
    return z3.If(z3.fpGT(x, z3.FPVal(0.0, sort)), d,
                 z3.fpMul(RNE, d, z3.FPVal(float(attrs["slope"]), sort)))


def _sign(sort, a, attrs):
    one, zero = z3.FPVal(1.0, sort), z3.FPVal(0.0, sort)
    return z3.If(z3.fpIsNaN(a), a, z3.If(z3.fpGT(a, zero), one,
                                         z3.If(z3.fpLT(a, zero), -one, zero)))


#: op -> encoding (the sort, the arguments as FP terms, the node's attributes).
FP_ENCODINGS: dict[str, Callable] = {
    "Add": lambda s, a, b, _: z3.fpAdd(RNE, a, b),
    "Subtract": lambda s, a, b, _: z3.fpSub(RNE, a, b),
    "Multiply": lambda s, a, b, _: z3.fpMul(RNE, a, b),
    "Divide": lambda s, a, b, _: z3.fpDiv(RNE, a, b),
    "Negative": lambda s, a, _: z3.fpNeg(a),
    "Absolute": lambda s, a, _: z3.fpAbs(a),
    "Reciprocal": lambda s, a, _: z3.fpDiv(RNE, z3.FPVal(1.0, s), a),
    "Square": lambda s, a, _: z3.fpMul(RNE, a, a),
    "Sqrt": lambda s, a, _: z3.fpSqrt(RNE, a),
    "Maximum": lambda s, a, b, _: _nan_or(a, b, z3.If(z3.fpGEQ(a, b), a, b), s),
    "Minimum": lambda s, a, b, _: _nan_or(a, b, z3.If(z3.fpLEQ(a, b), a, b), s),
    "Greater": _flag(z3.fpGT),
    "Less": _flag(z3.fpLT),
    "GreaterEqual": _flag(z3.fpGEQ),
    "LessEqual": _flag(z3.fpLEQ),
    "Equal": _flag(z3.fpEQ),
    "NotEqual": _flag(lambda a, b: z3.Not(z3.fpEQ(a, b))),
    "Sign": _sign,
    "Relu": _relu,
    "ReluBprop": _relu_bprop,
}


def encodable(inst: Instance) -> bool:
    """Every op elementwise with an FP encoding, a float input, a uniform constant, or a
    broadcast of a scalar: each result element is then the same formula of one element of
    each input (elementwise operands share their axes), so one element stands for all."""
    after = inst.after if inst.stop == "fixpoint" else inst.step
    for node in toposort(list(inst.outputs) + list(after or ())):
        if node.outputs is not None:
            return False
        if node.op in ("Placeholder", "Variable"):
            ok = node.dtype.kind == "f"
        elif node.op == "Constant":
            value = np.asarray(node.attrs["value"])
            ok = value.size > 0 and bool(np.all(value == value.flat[0]))
        elif node.op == "Broadcast":
            ok = not node.args[0].axes
        else:
            ok = node.op in FP_ENCODINGS
        if not ok:
            return False
    return True


def _evaluate(outputs, sort, inputs: dict) -> list:
    values: dict[Node, object] = {}
    for node in toposort(outputs):
        if node.op in ("Placeholder", "Variable"):
            values[node] = inputs.setdefault(node, z3.FP(node.name, sort))
        elif node.op == "Constant":
            values[node] = z3.FPVal(float(np.asarray(node.attrs["value"]).flat[0]), sort)
        elif node.op == "Broadcast":  # of a scalar: its value
            values[node] = values[node.args[0]]
        else:
            args = [values[a] for a in node.args]
            values[node] = FP_ENCODINGS[node.op](sort, *args, node.attrs)
    return [values[o] for o in outputs]


def _same(b, a, semantics: str):
    equal = z3.fpEQ(a, b)  # +0 and -0 alike; an infinity only equals itself
    if semantics == "refine":
        return z3.Or(z3.fpIsNaN(b), z3.fpIsInf(b), equal)
    return z3.If(z3.fpIsNaN(b), z3.Or(z3.fpIsNaN(a), z3.fpIsInf(a)), equal)


def _precondition(inst: Instance, inputs: dict, sort):
    parts = []
    for a, node in inst.assumed:
        if node not in inputs:
            return None  # an assumption on a computed node: the real proof handles it
        # compared in float64, where the bound is exact: |x| <= 1.8e308 rounded to float16
        # would be |x| <= inf, and admit the infinities the assumption rules out
        x, wide = z3.fpToFP(RNE, inputs[node], z3.Float64()), z3.Float64()
        if a.low > -np.inf:
            low = z3.FPVal(float(a.low), wide)
            parts.append(z3.fpGT(x, low) if a.low_open else z3.fpGEQ(x, low))
        if a.high < np.inf:
            high = z3.FPVal(float(a.high), wide)
            parts.append(z3.fpLT(x, high) if a.high_open else z3.fpLEQ(x, high))
    return z3.And(*parts) if parts else z3.BoolVal(True)


def _query(inst: Instance, sort, semantics: str):
    """Inputs where the results differ, as a formula (None: an assumption FP cannot state)."""
    after = inst.after if inst.stop == "fixpoint" else inst.step
    inputs: dict = {}
    left = _evaluate(inst.outputs, sort, inputs)
    right = _evaluate(after, sort, inputs)
    pre = _precondition(inst, inputs, sort)
    if pre is None:
        return None
    return z3.And(pre, z3.Not(z3.And(*[_same(b, a, semantics) for b, a in zip(left, right)])))


def prove_in_floats(instances: list[Instance], semantics: str = "strict",
                    budget: Budget | None = None) -> bool:
    """Whether every instance's rewrite keeps every result in float16, 32 and 64 (instances
    of one formula are decided once); False, too, when the proof's budget cannot afford it
    (the proof over the reals then meets the budget and says so)."""
    budget = budget or Budget().start()
    for make in FORMATS.values():
        queries = [_query(inst, make(), semantics) for inst in instances]
        if any(q is None for q in queries):
            return False
        try:
            check_size(*queries)
        except BudgetSpent:
            return False
        for query in {q.get_id(): q for q in queries}.values():
            if not _unsat(query, budget):
                return False
    return True


def _unsat(query, budget: Budget) -> bool:
    solver = z3.Solver()
    solver.set("rlimit", RLIMIT)
    try:
        with CpuStop(budget.left()):
            solver.add(query)
            return solver.check() == z3.unsat
    except (z3.Z3Exception, BudgetSpent):
        return False
