"""ngrules' fused ops as ONNX functions of the `ngrules` domain, with standard-op bodies.

A backend that knows the fused kernel can run the node as one op; any other runtime inlines the
body. Batchnorm's channel is the first axis and the statistics run over the rest (biased
variance, eps inside the square root), as the op table says.
"""

from __future__ import annotations

from ngrules.interop.onnx import ndarrays, proto

DOMAIN = "ngrules"


def _attr_const(name: str, like: str, out: str, tmp: str):
    """Nodes making `out`: the float attribute `name`, cast like the tensor `like`."""
    const = proto.make_node("Constant", [], [tmp])
    float_type = proto.AttributeProto.FLOAT
    ref = proto.AttributeProto(name="value_float", ref_attr_name=name, type=float_type)
    const.attribute.append(ref)
    return [const, proto.make_node("CastLike", [tmp, like], [out])]


def _int64(name: str, values):
    tensor = ndarrays.make_tensor(name + "_v", 7, [len(values)], list(values))
    return proto.make_node("Constant", [], [name], value=tensor)


def _function(name: str, inputs, outputs, nodes, attrs, opset: int = 17):
    return proto.make_function(
        DOMAIN, name, inputs, outputs, nodes,
        opset_imports=[proto.make_opsetid("", opset)], attributes=attrs,
    )


def _row_mean(x: str, out: str, opset: int) -> list:
    """ReduceMean over dimension 1, kept: `axes` is an attribute before opset 18, an input
    from it."""
    if opset < 18:
        return [proto.make_node("ReduceMean", [x], [out], axes=[1], keepdims=1)]
    return [_int64(out + "_axes", [1]),
            proto.make_node("ReduceMean", [x, out + "_axes"], [out], keepdims=1)]


def _normalised(x: str, opset: int) -> list:
    """x as [C, M] ("x2"), centred ("xc"), its inverse deviation ("inv") and xhat ("xh")."""
    return [
        proto.make_node("Flatten", [x], ["x2"], axis=1),
        *_row_mean("x2", "mean2", opset),
        proto.make_node("Sub", ["x2", "mean2"], ["xc"]),
        proto.make_node("Mul", ["xc", "xc"], ["sq"]),
        *_row_mean("sq", "var2", opset),
        *_attr_const("eps", "x2", "eps_c", "eps_f"),
        proto.make_node("Add", ["var2", "eps_c"], ["var_eps"]),
        proto.make_node("Sqrt", ["var_eps"], ["std"]),
        proto.make_node("Reciprocal", ["std"], ["inv"]),
        proto.make_node("Mul", ["xc", "inv"], ["xh"]),
    ]


def batchnorm_fprop(opset: int = 17):
    """(y, mean, var) = BatchnormFprop(x, gamma, beta; eps)."""
    nodes = _normalised("x", opset) + [
        _int64("col", [-1, 1]),
        proto.make_node("Reshape", ["gamma", "col"], ["g2"]),
        proto.make_node("Reshape", ["beta", "col"], ["b2"]),
        proto.make_node("Mul", ["xh", "g2"], ["scaled"]),
        proto.make_node("Add", ["scaled", "b2"], ["y2"]),
        proto.make_node("Shape", ["x"], ["shape"]),
        proto.make_node("Reshape", ["y2", "shape"], ["y"]),
        _int64("flat", [-1]),
        proto.make_node("Reshape", ["mean2", "flat"], ["mean"]),
        proto.make_node("Reshape", ["var2", "flat"], ["var"]),
    ]
    return _function("BatchnormFprop", ["x", "gamma", "beta"], ["y", "mean", "var"], nodes,
                     ["eps"], opset)


def batchnorm_bprop(opset: int = 17):
    """(dx, dgamma, dbeta) = BatchnormBprop(delta, x, gamma, mean, var; eps), from the given
    statistics: dx = gamma * inv * (delta - xhat * mean(delta * xhat) - mean(delta))."""
    nodes = [
        _int64("col", [-1, 1]),
        _int64("one", [1]),
        proto.make_node("Flatten", ["x"], ["x2"], axis=1),
        proto.make_node("Flatten", ["delta"], ["d2"], axis=1),
        proto.make_node("Reshape", ["mean", "col"], ["mean2"]),
        proto.make_node("Reshape", ["var", "col"], ["var2"]),
        proto.make_node("Reshape", ["gamma", "col"], ["g2"]),
        proto.make_node("Sub", ["x2", "mean2"], ["xc"]),
        *_attr_const("eps", "x2", "eps_c", "eps_f"),
        proto.make_node("Add", ["var2", "eps_c"], ["var_eps"]),
        proto.make_node("Sqrt", ["var_eps"], ["std"]),
        proto.make_node("Reciprocal", ["std"], ["inv"]),
        proto.make_node("Mul", ["xc", "inv"], ["xh"]),
        proto.make_node("Mul", ["d2", "xh"], ["dxh"]),
        proto.make_node("ReduceSum", ["dxh", "one"], ["dgamma"], keepdims=0),
        proto.make_node("ReduceSum", ["d2", "one"], ["dbeta"], keepdims=0),
        *_row_mean("dxh", "m_dxh", opset),
        *_row_mean("d2", "m_d", opset),
        proto.make_node("Mul", ["xh", "m_dxh"], ["t1"]),
        proto.make_node("Sub", ["d2", "t1"], ["t2"]),
        proto.make_node("Sub", ["t2", "m_d"], ["t3"]),
        proto.make_node("Mul", ["g2", "inv"], ["scale"]),
        proto.make_node("Mul", ["t3", "scale"], ["dx2"]),
        proto.make_node("Shape", ["x"], ["shape"]),
        proto.make_node("Reshape", ["dx2", "shape"], ["dx"]),
    ]
    return _function("BatchnormBprop", ["delta", "x", "gamma", "mean", "var"],
                     ["dx", "dgamma", "dbeta"], nodes, ["eps"], opset)


def relu_bprop(opset: int = 17):
    """ReluBprop(delta, x; slope) = delta where x > 0, slope * delta elsewhere."""
    nodes = [
        *_attr_const("slope", "x", "slope_c", "slope_f"),
        proto.make_node("Constant", [], ["zero_f"], value_float=0.0),
        proto.make_node("CastLike", ["zero_f", "x"], ["zero"]),
        proto.make_node("Greater", ["x", "zero"], ["pos"]),
        proto.make_node("Mul", ["delta", "slope_c"], ["scaled"]),
        proto.make_node("Where", ["pos", "delta", "scaled"], ["out"]),
    ]
    return _function("ReluBprop", ["delta", "x"], ["out"], nodes, ["slope"], opset)


def _number(name: str, value: float, like: str) -> list:
    """Nodes making `name`: the constant `value`, cast like the tensor `like`."""
    return [proto.make_node("Constant", [], [name + "_f"], value_float=value),
            proto.make_node("CastLike", [name + "_f", like], [name])]


def _gelu(name: str, squash: list, opset: int):
    """Gelu's shared shape, y = 0.5 x (1 + s), where the nodes `squash` compute s."""
    nodes = [
        *_number("one", 1.0, "x"), *_number("half", 0.5, "x"), *squash,
        proto.make_node("Add", ["s", "one"], ["s1"]),
        proto.make_node("Mul", ["x", "half"], ["hx"]),
        proto.make_node("Mul", ["hx", "s1"], ["y"]),
    ]
    return _function(name, ["x"], ["y"], nodes, [], opset)


def gelu(opset: int = 17):
    """Gelu(x) = 0.5 x (1 + erf(x / sqrt 2)): ONNX's Gelu (opset 20) for older opsets. A
    division by sqrt 2, not a product by its inverse: onnxruntime joins this form into its
    own Gelu kernel once it has inlined the function (its GeluFusion reads a Div)."""
    return _gelu("Gelu", [
        *_number("r2", 1.4142135623730951, "x"),
        proto.make_node("Div", ["x", "r2"], ["xs"]),
        proto.make_node("Erf", ["xs"], ["s"]),
    ], opset)


def gelu_tanh(opset: int = 17):
    """Gelu(x, approximate='tanh') = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))), in
    the association onnxruntime joins into its FastGelu kernel once it has inlined the function
    (written as sqrt(2/pi) (x + 0.044715 x^3) it stayed nine nodes: GPT-2 ran 1.1x slower)."""
    return _gelu("GeluTanh", [
        *_number("k", 0.7978845608028654, "x"), *_number("c", 0.044715, "x"),
        proto.make_node("Mul", ["x", "c"], ["cx"]),
        proto.make_node("Mul", ["cx", "x"], ["cx2"]),
        proto.make_node("Add", ["cx2", "one"], ["inner"]),
        proto.make_node("Mul", ["x", "k"], ["kx"]),
        proto.make_node("Mul", ["kx", "inner"], ["scaled"]),
        proto.make_node("Tanh", ["scaled"], ["s"]),
    ], opset)


FUNCTIONS = {
    "Gelu": gelu,
    "GeluTanh": gelu_tanh,
    "BatchnormFprop": batchnorm_fprop,
    "BatchnormBprop": batchnorm_bprop,
    "ReluBprop": relu_bprop,
}
