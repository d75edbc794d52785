"""ONNX's optimizer steps (domain ai.onnx.preview.training) from primitives: Momentum
(standard or Nesterov), Adagrad and Adam update each tensor X from its gradient G and state,
given the learning rate R and the step count T (at run time: where a formula depends on
T > 0, both cases are computed and one selected)."""

from __future__ import annotations

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.shaping import Tensor, broadcast_to
from ngrules.ir import builders as F
from ngrules.ir.graph import Node

_TRAINING = "ai.onnx.preview.training"


def _groups(ctx: Context, per_tensor: int) -> tuple[Node, Node, list[list[Tensor]]]:
    """R, T as float scalars and, per optimized tensor, its X, G and states (as X's axes)."""
    n = (ctx.arity - 2) // per_tensor
    x0 = ctx.x(2).node
    rate = F.cast(broadcast_to(ctx.x(0), ()), x0.dtype)
    count = F.cast(broadcast_to(ctx.x(1), ()), x0.dtype)
    groups = []
    for i in range(n):
        x = ctx.x(2 + i)
        groups.append([x] + [Tensor(broadcast_to(ctx.x(2 + k * n + i), x.axes), x.axes)
                             for k in range(1, per_tensor)])
    return rate, count, groups


def _outputs(groups: list[list[Tensor]], results: list[tuple]) -> list[Tensor]:
    """ONNX's order: every new X, then every first state, then every second one."""
    return [Tensor(r[k], g[0].axes) for k in range(len(results[0]))
            for g, r in zip(groups, results)]


def _started(count: Node, then, otherwise) -> Node:
    return F.where(F.greater(count, 0.0), then, otherwise)


@converter("Momentum", domain=_TRAINING)
def _momentum(ctx: Context):
    rate, count, groups = _groups(ctx, 3)
    alpha, beta = float(ctx.attr("alpha")), float(ctx.attr("beta"))
    decay, nesterov = float(ctx.attr("norm_coefficient")), ctx.attr("mode") == "nesterov"
    results = []
    for x, g, v in groups:
        grad = x.node * decay + g.node
        step = _started(count, F.constant(beta, dtype=grad.dtype),
                        F.constant(1.0, dtype=grad.dtype))
        v_new = v.node * alpha + F.broadcast(step, grad.axes) * grad
        move = grad + v_new * alpha if nesterov else v_new
        results.append((x.node - F.broadcast(rate, move.axes) * move, v_new))
    return _outputs(groups, results)


@converter("Adagrad", domain=_TRAINING)
def _adagrad(ctx: Context):
    rate, count, groups = _groups(ctx, 3)
    decay_factor = float(ctx.attr("decay_factor", 0.0))
    epsilon, decay = float(ctx.attr("epsilon", 1e-6)), float(ctx.attr("norm_coefficient", 0.0))
    adjusted = rate / (count * decay_factor + 1.0)
    results = []
    for x, g, h in groups:
        grad = x.node * decay + g.node
        h_new = h.node + grad * grad
        step = F.broadcast(adjusted, grad.axes) * grad / (F.sqrt(h_new) + epsilon)
        results.append((x.node - step, h_new))
    return _outputs(groups, results)


@converter("Adam", domain=_TRAINING)
def _adam(ctx: Context):
    rate, count, groups = _groups(ctx, 4)
    alpha, beta = float(ctx.attr("alpha", 0.9)), float(ctx.attr("beta", 0.999))
    epsilon, decay = float(ctx.attr("epsilon", 1e-6)), float(ctx.attr("norm_coefficient", 0.0))
    post = float(ctx.attr("norm_coefficient_post", 0.0))
    dtype = rate.dtype
    corrected = rate * F.sqrt(1.0 - F.power(F.constant(beta, dtype=dtype), count)) / (
        1.0 - F.power(F.constant(alpha, dtype=dtype), count))
    adjusted = _started(count, corrected, rate)
    results = []
    for x, g, v, h in groups:
        grad = x.node * decay + g.node
        v_new = v.node * alpha + grad * (1.0 - alpha)
        h_new = h.node * beta + grad * grad * (1.0 - beta)
        x_new = x.node - F.broadcast(adjusted, grad.axes) * (v_new / (F.sqrt(h_new) + epsilon))
        results.append((x_new * (1.0 - post), v_new, h_new))
    return _outputs(groups, results)
