"""ONNX NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss from primitives: the target
class picked by a `OneHot` of the labels (an ignored label picks nothing), weighted, reduced
(none, sum, or the weighted mean)."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.converters.nn import log_softmax_form
from ngrules.interop.onnx.importing.shaping import Tensor, conform
from ngrules.ir import builders as F
from ngrules.ir.axes import Axes
from ngrules.ir.graph import Node, make_node


def _nll(ctx: Context, log_prob: Tensor, labels: Tensor, weight_index: int) -> Tensor:
    """-log_prob[n, label[n, ...], ...] * weight[label], reduced as `reduction` says."""
    rest = (log_prob.axes[0],) + log_prob.axes[2:]
    classes = log_prob.axes[1]
    label = F.cast(conform(labels, rest).node, np.int64)
    dtype = log_prob.node.dtype
    ignore = ctx.attr("ignore_index")
    keep = None
    if ignore is not None:
        keep = F.not_equal(label, F.constant(int(ignore), dtype=np.int64))
        label = F.where(keep, label, F.constant(0, dtype=np.int64))
    hot = make_node("OneHot", (label,), axis=classes, dtype=dtype)
    picked = F.sum(log_prob.node * F.axes_with_order(hot, log_prob.node.axes),
                   reduction_axes=[classes])
    if ctx.has(weight_index):
        weights = F.dot(conform(ctx.x(weight_index), (classes,)).node, hot)
    else:
        weights = F.broadcast(F.constant(1, dtype=dtype), Axes(rest))
    if keep is not None:
        weights = weights * keep
    loss = -(picked * weights)
    reduction = ctx.attr("reduction", "mean")
    if reduction == "none":
        return Tensor(F.axes_with_order(loss, Axes(rest)), rest)
    total = F.sum(loss, out_axes=())
    if reduction == "sum":
        return Tensor(total, ())
    return Tensor(total / F.sum(weights, out_axes=()), ())


@converter("NegativeLogLikelihoodLoss")
def _nll_loss(ctx: Context):
    return [_nll(ctx, ctx.x(0), ctx.x(1), 2)]


@converter("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy(ctx: Context):
    scores = ctx.x(0)
    log_prob: Node = log_softmax_form(scores.node, [scores.axes[1]])
    log_prob_t = Tensor(log_prob, scores.axes)
    return [_nll(ctx, log_prob_t, ctx.x(1), 2), log_prob_t]
