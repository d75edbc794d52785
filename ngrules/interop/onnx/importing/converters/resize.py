"""ONNX Resize: every mode (nearest, linear, cubic) resizes each dimension by a linear map,
so each resized dimension is one `Dot` with a constant (output length by input length)
matrix. The matrix is the node's own Resize applied to the identity along that dimension,
computed at import by onnx's reference evaluator: every attribute (coordinate transformation,
nearest rounding, cubic coefficient, antialias, crop) means exactly what it means to ONNX."""

from __future__ import annotations

import numpy as np

from ngrules.interop.onnx import ndarrays, proto
from ngrules.interop.onnx.importing.context import Context, converter
from ngrules.interop.onnx.importing.shaping import Tensor, conform, temp_axis
from ngrules.ir import builders as F

_KEPT_ATTRS = ("mode", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
               "nearest_mode", "antialias", "extrapolation_value")


def _resize_matrix(ctx: Context, n: int, m: int, scale: float, roi) -> np.ndarray:
    """The (m, n) matrix of the node's resize of one dimension from n to m elements."""
    from onnx.reference import ReferenceEvaluator

    attrs = {k: ctx.attr(k) for k in _KEPT_ATTRS if ctx.attr(k) is not None}
    roi_value = np.array([roi[0], 0.0, roi[1], 1.0] if roi is not None else [], np.float32)
    inits = [ndarrays.from_array(roi_value, "roi"),
             ndarrays.from_array(np.array([scale, 1.0], np.float32), "scales")]
    node = proto.make_node("Resize", ["x", "roi", "scales"], ["y"], **attrs)
    graph = proto.make_graph(
        [node], "resize", [proto.make_tensor_value_info("x", proto.TensorProto.DOUBLE, [n, n])],
        [proto.make_tensor_value_info("y", proto.TensorProto.DOUBLE, None)], inits)
    model = proto.make_model(graph, opset_imports=[proto.make_opsetid("", ctx.importer.opset)])
    try:
        (matrix,) = ReferenceEvaluator(model).run(None, {"x": np.eye(n)})
    except Exception as e:  # onnx's evaluator, on attribute values it refuses
        raise ctx.unsupported(f"this Resize ({type(e).__name__}: {e})") from None
    if matrix.shape != (m, n):
        raise ctx.unsupported(f"a Resize from {n} to {m} at scale {scale}")
    return matrix


def _scales(ctx: Context, shape, out_shape, positions) -> list[float]:
    """The scale of each resized position: given, or from the sizes (one common scale under
    keep_aspect_ratio_policy not_larger / not_smaller)."""
    scales = ctx.const(2) if ctx.has(2) else None
    if scales is not None and scales.size:
        return [float(s) for s in np.ravel(scales)]
    sizes = ctx.need_const(3, "Resize sizes") if ctx.has(3) else None
    if sizes is None:
        raise ctx.unsupported("a Resize without scales or sizes")
    ratios = [int(s) / shape[p] for s, p in zip(np.ravel(sizes), positions)]
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        return ratios
    common = min(ratios) if policy == "not_larger" else max(ratios)
    return [common] * len(positions)


@converter("Resize")
def _resize(ctx: Context):
    x, out = ctx.x(0), ctx.out_axes(0)
    if ctx.importer.opset < 11:
        raise ctx.unsupported("Resize before opset 11")
    if x.node.dtype.kind != "f":
        raise ctx.unsupported(f"Resize of {x.node.dtype} tensors")
    crop = ctx.attr("coordinate_transformation_mode") == "tf_crop_and_resize"
    if crop and ctx.attr("extrapolation_value", 0.0) != 0.0:
        raise ctx.unsupported("a non-zero extrapolation_value")
    rank = len(x.axes)
    positions = [int(a) % rank for a in ctx.attr("axes") or range(rank)]
    roi = np.ravel(ctx.need_const(1, "Resize roi")) if crop else None
    out_shape = ctx.out_shape()
    t = x
    for k, (p, scale) in enumerate(zip(positions, _scales(ctx, x.shape, out_shape, positions))):
        n, m = x.shape[p], out_shape[p]
        window = (roi[k], roi[len(positions) + k]) if roi is not None else None
        if n == m and scale == 1.0 and window is None:
            continue
        matrix = _resize_matrix(ctx, n, m, scale, window).astype(x.node.dtype)
        target = temp_axis(m)
        weights = F.constant(matrix, [target, t.axes[p]], dtype=matrix.dtype)
        t = Tensor(F.dot(weights, t.node), t.axes[:p] + (target,) + t.axes[p + 1 :])
    return [conform(t, out)]
