"""The static shapes of a written model's values, by onnx's shape inference (for the passes
that rewrite written nodes: `transposes`, `ort_target`), with data propagation: a
Reshape to a shape the graph computes (`recipes`) has a known output shape."""

from __future__ import annotations

from ngrules.interop.onnx import proto


def value_shapes(model, arrays) -> dict[str, tuple]:
    """Every value's shape (a dimension onnx cannot infer as its dim_param, or ''), by onnx's
    inference over the model with its separate weights as typed inputs."""

    from ngrules.interop.onnx.weights import as_inputs

    with as_inputs(model, arrays):
        inferred = proto.infer_shapes(model, data_prop=True).graph  # Shape, Concat
    shapes = {}
    for vi in [*inferred.input, *inferred.value_info, *inferred.output]:
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param
                                for d in dims)
    for t in inferred.initializer:
        shapes[t.name] = tuple(t.dims)
    return shapes
