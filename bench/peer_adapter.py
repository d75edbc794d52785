"""ngrules peer: named-axes tensor graph + declarative `.rules` files + ng.rewrite.

A copy of ../shared/peers/adapters/ngrules_peer.py with its imports moved to today's module
paths (`ngrules.ir.ops`, `ngrules.ir.opgen`); run it with the harness:
`PYTHONPATH=bench python ../shared/peers/run_peers.py --peers plain,tinygrad,ngrules
--adapter ngrules=peer_adapter:NgrulesAdapter --no-gc ...`.

Rules: W1 and W2 are written in ngrules' own rule language, in `peer_w1.rules` and
`peer_w2.rules` beside this file; `__init__` registers the fused `LayerNorm` op, loads and
checks both files and runs each once on a tiny graph, so the engine's compiled matchers and
guard/replacement expressions exist before anything is timed.  `rewrite()` is one
`ng.rewrite(outputs, rules, pipeline="w1"|"w2")` call; a pass of ngrules' engine ends at a
fixpoint of its rules (`stop == "fixpoint"`, checked in `count()`, which also re-runs the
rules on the result and requires that none fires).

Tensor types (the spec's values are "float32 scalars"; ngrules is a named-axes tensor IR, so
every value gets a real tensor type, the same one in W1 and W2):
  * inputs x_lane: Placeholder [N, F] (N rows, F features; lengths 4 and 8 by default, which
    only matter when executing), float32;
  * W2's g_lane, b_lane: Placeholder [F] (per-feature scale and shift, as in layer norm);
  * `mean` is a mean over the feature axis F, written with the front end:
    `ng.mean(v, reduction_axes=[F])` = Divide(Sum(v, reduction_axes=[F]), Broadcast(Constant(8)))
    with axes [N]; its users (sub, add eps, mul) broadcast it back to [N, F] through the front
    end's ngraph broadcasting, so the spec's block is the layer norm of each row of x over F;
  * a literal float becomes what the front end makes of a Python number: a 0-d Constant of the
    other operand's dtype, broadcast to the operand axes (Broadcast(Constant(1.0)) for `h * 1.0`).
    Constants and their broadcasts are hash-consed, so the whole graph has one of each value.

Op mapping: add/mul/sub -> ng.add/multiply/subtract (Add/Multiply/Subtract), neg -> Negative,
sqrt -> Sqrt, recip -> Reciprocal, exp -> Exp, mean -> Sum + Divide (above), layernorm ->
LayerNorm(x, g, b, eps=...) registered here with `ng.register_op` (numpy kernel: normalise x
over g's axes).

Counting (`count()`): op nodes are the nodes of the rewritten graph except leaves
(Placeholder/Constant/Variable: the spec's inputs and constants) and views (ops with the `view`
trait: Broadcast, ReorderAxes, ...).  Views are how the named-axes IR spells the spec's
implicit scalar broadcasting -- of literal constants, of a mean back to its input's axes, of
g/b to x's axes -- and compute nothing.  After rewriting, the only view left is W1's
Broadcast(Constant(2.0)) (one node, shared by every `mul(a, 2.0)`); W2 keeps none (LayerNorm
takes g and b unbroadcast).  Before rewriting, ngrules' graph has more op nodes than the spec
(W2's `mean` is two ops, Sum and Divide: 13 per block instead of 11); throughput is reported
per spec node like every other peer.  `extra` records the number of rewrites and the views
left.
"""

from __future__ import annotations

import os

import numpy as np
from adapters.base import Adapter, Counts  # the peers' harness puts its folder on sys.path

import ngrules as ng
from ngrules.ir.opgen import axis_pool, some_axes
from ngrules.ir.ops import AttrSpec, NotDifferentiable

HERE = os.path.dirname(os.path.abspath(__file__))
RULES_FILES = {"W1": os.path.join(HERE, "peer_w1.rules"), "W2": os.path.join(HERE, "peer_w2.rules")}
PIPELINES = {"W1": "w1", "W2": "w2"}
LEAVES = frozenset(name for name, op in ng.OPS.items() if op.has("leaf"))


# -- the fused op ---------------------------------------------------------------------------
def _ln_infer(args, attrs):
    x, g, b = args
    if len({x.dtype, g.dtype, b.dtype}) != 1:
        raise ng.OpError("LayerNorm: x, g and b must have one dtype")
    if not len(g.axes):
        raise ng.OpError("LayerNorm: g must have at least one axis (the normalised axes)")
    for a in g.axes:
        if a not in x.axes or x.axes[x.axes.index(a)].length != a.length:
            raise ng.OpError(f"LayerNorm: g's axis {a!r} is not an axis of x {x.axes!r}")
    if b.axes != g.axes or b.axes.lengths != g.axes.lengths:
        raise ng.OpError(f"LayerNorm: b has axes {b.axes!r}, g has {g.axes!r}")
    return x.axes, x.dtype


def _ln_kernel(node):
    """(x - mean) / sqrt(var + eps) * g + b, mean and (biased) var over g's axes of x."""
    x, g, _ = node.args
    eps = node.attrs["eps"]
    red = tuple(x.axes.index(a) for a in g.axes)  # where g's axes sit in x
    perm = sorted(range(len(red)), key=red.__getitem__)  # g's axes in x's order
    shape = tuple(n if i in red else 1 for i, n in enumerate(x.axes.lengths))

    def run(xv, gv, bv):
        mu = xv.mean(axis=red, keepdims=True)
        d = xv - mu
        var = (d * d).mean(axis=red, keepdims=True)
        gl = np.transpose(gv, perm).reshape(shape)
        bl = np.transpose(bv, perm).reshape(shape)
        return (d / np.sqrt(var + eps) * gl + bl).astype(xv.dtype, copy=False)

    return run


def _ln_gen(draw, leaf):
    """A random LayerNorm: x over 1-3 axes, g and b over a non-empty subset of them."""
    from hypothesis import strategies as st

    xa = some_axes(draw, axis_pool(draw), min_size=1)
    ga = some_axes(draw, tuple(xa), min_size=1)
    eps = draw(st.sampled_from([1e-5, 1e-3, 0.1]))
    return ng.make_node("LayerNorm", (leaf(xa), leaf(ga), leaf(ga)), eps=eps)


def register_layernorm() -> None:
    if "LayerNorm" in ng.OPS:
        return
    ng.register_op(
        "LayerNorm",
        arity=3,
        attrs=(AttrSpec("eps", "float", 1e-5, "added to the variance inside the square root"),),
        infer=_ln_infer,
        kernel=_ln_kernel,
        grad=NotDifferentiable("the peer benchmark never differentiates LayerNorm"),
        gen=_ln_gen,
        traits={"fused"},
        doc="g * (x - mean) / sqrt(var + eps) + b, normalised over g's axes of x",
    )


# -- the adapter ----------------------------------------------------------------------------
class NgrulesAdapter(Adapter):
    name = "ngrules"

    def __init__(self, rows: int = 4, features: int = 8, dtype=np.float32, warm: bool = True):
        register_layernorm()
        self.N = ng.make_axis(rows, "N")
        self.F = ng.make_axis(features, "F")
        self.dtype = dtype
        F_ = self.F
        self.builders = {
            "add": ng.add,
            "mul": ng.multiply,
            "sub": ng.subtract,
            "neg": ng.negative,
            "sqrt": ng.sqrt,
            "recip": ng.reciprocal,
            "exp": ng.exp,
            "mean": lambda v: ng.mean(v, reduction_axes=[F_]),  # over the features, axes [N]
        }
        self.views = frozenset(name for name, op in ng.OPS.items() if op.has("view"))
        self.rules = {w: ng.load_rules(path) for w, path in RULES_FILES.items()}
        self.native_ops = None  # op nodes of the last graph built (views/leaves excluded), an int
        if warm:  # compile each rule's matcher and expressions now, not in a timed call
            from workloads import warmup_spec

            for w in ("W1", "W2"):
                spec = warmup_spec(w)
                res = self.rewrite(self.build(spec), spec)
                assert res.stop == "fixpoint" and res.fired(), (w, res.stop, res.fired())
                del res

    def version(self):
        import importlib.metadata as md

        return f"ngrules {md.version('ngrules')} (numpy {np.__version__})"

    def build(self, spec):
        NF, F_, dt = [self.N, self.F], [self.F], self.dtype
        if spec.workload == "W1":
            vals = [ng.placeholder(NF, dtype=dt, name=f"x{i}") for i in range(spec.n_inputs)]
        else:
            vals = []
            for lane in range(spec.lanes):  # x_l = 3l, g_l = 3l+1, b_l = 3l+2
                vals += [
                    ng.placeholder(NF, dtype=dt, name=f"x{lane}"),
                    ng.placeholder(F_, dtype=dt, name=f"g{lane}"),
                    ng.placeholder(F_, dtype=dt, name=f"b{lane}"),
                ]
        builders = self.builders
        for op, operands in spec.nodes:
            vals.append(builders[op](*[vals[o] if o.__class__ is int else o for o in operands]))
        outputs = [vals[o] for o in spec.outputs]
        self.native_ops = self._ops(ng.toposort(outputs))
        return outputs

    def rewrite(self, graph, spec):
        return ng.rewrite(graph, self.rules[spec.workload], pipeline=PIPELINES[spec.workload])

    def _ops(self, order):
        views = self.views
        return sum(1 for n in order if n.op not in LEAVES and n.op not in views)

    def count(self, result, spec):
        if result.stop != "fixpoint":
            raise RuntimeError(f"ngrules stopped with {result.stop}: {result.message}")
        order = ng.toposort(result.outputs)
        # fixpoint check (untimed): the same rules on the result must not fire again
        again = ng.rewrite(
            result.outputs, self.rules[spec.workload], pipeline=PIPELINES[spec.workload]
        )
        if again.fired() or again.outputs != result.outputs:
            raise RuntimeError(f"not a fixpoint: a second rewrite fired {again.fired()}")
        del again
        fused = sum(1 for n in order if n.op == "LayerNorm")
        views_left = sum(1 for n in order if n.op in self.views)
        return Counts(
            nodes=self._ops(order),
            fused=fused,
            extra={
                "rewrites": sum(result.fired().values()),
                "ops_before": self.native_ops,
                "views_left": views_left,
            },
        )
