"""ngrules' fused ops as ONNX functions of the `ngrules` domain, with standard-op bodies.

A backend that knows the fused kernel can run the node as one op; any other runtime inlines the
body. Batchnorm's channel is the first axis and the statistics run over the rest (biased
variance, eps inside the square root), as the op table says.
"""

from __future__ import annotations

DOMAIN = "ngrules"


def _h():
    from onnx import helper

    return helper


def _attr_const(name: str, like: str, out: str, tmp: str):
    """Nodes making `out`: the float attribute `name`, cast like the tensor `like`."""
    from onnx import AttributeProto, helper

    const = helper.make_node("Constant", [], [tmp])
    ref = AttributeProto(name="value_float", ref_attr_name=name, type=AttributeProto.FLOAT)
    const.attribute.append(ref)
    return [const, helper.make_node("CastLike", [tmp, like], [out])]


def _int64(name: str, values):
    from onnx import helper

    tensor = helper.make_tensor(name + "_v", 7, [len(values)], list(values))
    return helper.make_node("Constant", [], [name], value=tensor)


def _function(name: str, inputs, outputs, nodes, attrs, opset: int = 17):
    h = _h()
    return h.make_function(
        DOMAIN, name, inputs, outputs, nodes,
        opset_imports=[h.make_opsetid("", opset)], attributes=attrs,
    )


def _row_mean(x: str, out: str, opset: int) -> list:
    """ReduceMean over dimension 1, kept: `axes` is an attribute before opset 18, an input
    from it."""
    h = _h()
    if opset < 18:
        return [h.make_node("ReduceMean", [x], [out], axes=[1], keepdims=1)]
    return [_int64(out + "_axes", [1]),
            h.make_node("ReduceMean", [x, out + "_axes"], [out], keepdims=1)]


def _normalised(h, x: str, opset: int) -> list:
    """x as [C, M] ("x2"), centred ("xc"), its inverse deviation ("inv") and xhat ("xh")."""
    return [
        h.make_node("Flatten", [x], ["x2"], axis=1),
        *_row_mean("x2", "mean2", opset),
        h.make_node("Sub", ["x2", "mean2"], ["xc"]),
        h.make_node("Mul", ["xc", "xc"], ["sq"]),
        *_row_mean("sq", "var2", opset),
        *_attr_const("eps", "x2", "eps_c", "eps_f"),
        h.make_node("Add", ["var2", "eps_c"], ["var_eps"]),
        h.make_node("Sqrt", ["var_eps"], ["std"]),
        h.make_node("Reciprocal", ["std"], ["inv"]),
        h.make_node("Mul", ["xc", "inv"], ["xh"]),
    ]


def batchnorm_fprop(opset: int = 17):
    """(y, mean, var) = BatchnormFprop(x, gamma, beta; eps)."""
    h = _h()
    nodes = _normalised(h, "x", opset) + [
        _int64("col", [-1, 1]),
        h.make_node("Reshape", ["gamma", "col"], ["g2"]),
        h.make_node("Reshape", ["beta", "col"], ["b2"]),
        h.make_node("Mul", ["xh", "g2"], ["scaled"]),
        h.make_node("Add", ["scaled", "b2"], ["y2"]),
        h.make_node("Shape", ["x"], ["shape"]),
        h.make_node("Reshape", ["y2", "shape"], ["y"]),
        _int64("flat", [-1]),
        h.make_node("Reshape", ["mean2", "flat"], ["mean"]),
        h.make_node("Reshape", ["var2", "flat"], ["var"]),
    ]
    return _function("BatchnormFprop", ["x", "gamma", "beta"], ["y", "mean", "var"], nodes,
                     ["eps"], opset)


def batchnorm_bprop(opset: int = 17):
    """(dx, dgamma, dbeta) = BatchnormBprop(delta, x, gamma, mean, var; eps), from the given
    statistics: dx = gamma * inv * (delta - xhat * mean(delta * xhat) - mean(delta))."""
    h = _h()
    nodes = [
        _int64("col", [-1, 1]),
        _int64("one", [1]),
        h.make_node("Flatten", ["x"], ["x2"], axis=1),
        h.make_node("Flatten", ["delta"], ["d2"], axis=1),
        h.make_node("Reshape", ["mean", "col"], ["mean2"]),
        h.make_node("Reshape", ["var", "col"], ["var2"]),
        h.make_node("Reshape", ["gamma", "col"], ["g2"]),
        h.make_node("Sub", ["x2", "mean2"], ["xc"]),
        *_attr_const("eps", "x2", "eps_c", "eps_f"),
        h.make_node("Add", ["var2", "eps_c"], ["var_eps"]),
        h.make_node("Sqrt", ["var_eps"], ["std"]),
        h.make_node("Reciprocal", ["std"], ["inv"]),
        h.make_node("Mul", ["xc", "inv"], ["xh"]),
        h.make_node("Mul", ["d2", "xh"], ["dxh"]),
        h.make_node("ReduceSum", ["dxh", "one"], ["dgamma"], keepdims=0),
        h.make_node("ReduceSum", ["d2", "one"], ["dbeta"], keepdims=0),
        *_row_mean("dxh", "m_dxh", opset),
        *_row_mean("d2", "m_d", opset),
        h.make_node("Mul", ["xh", "m_dxh"], ["t1"]),
        h.make_node("Sub", ["d2", "t1"], ["t2"]),
        h.make_node("Sub", ["t2", "m_d"], ["t3"]),
        h.make_node("Mul", ["g2", "inv"], ["scale"]),
        h.make_node("Mul", ["t3", "scale"], ["dx2"]),
        h.make_node("Shape", ["x"], ["shape"]),
        h.make_node("Reshape", ["dx2", "shape"], ["dx"]),
    ]
    return _function("BatchnormBprop", ["delta", "x", "gamma", "mean", "var"],
                     ["dx", "dgamma", "dbeta"], nodes, ["eps"], opset)


def relu_bprop(opset: int = 17):
    """ReluBprop(delta, x; slope) = delta where x > 0, slope * delta elsewhere."""
    h = _h()
    nodes = [
        *_attr_const("slope", "x", "slope_c", "slope_f"),
        h.make_node("Constant", [], ["zero_f"], value_float=0.0),
        h.make_node("CastLike", ["zero_f", "x"], ["zero"]),
        h.make_node("Greater", ["x", "zero"], ["pos"]),
        h.make_node("Mul", ["delta", "slope_c"], ["scaled"]),
        h.make_node("Where", ["pos", "delta", "scaled"], ["out"]),
    ]
    return _function("ReluBprop", ["delta", "x"], ["out"], nodes, ["slope"], opset)


def _number(name: str, value: float, like: str) -> list:
    """Nodes making `name`: the constant `value`, cast like the tensor `like`."""
    h = _h()
    return [h.make_node("Constant", [], [name + "_f"], value_float=value),
            h.make_node("CastLike", [name + "_f", like], [name])]


def _gelu(name: str, squash: list, opset: int):
    """Gelu's shared shape, y = 0.5 x (1 + s), where the nodes `squash` compute s."""
    h = _h()
    nodes = [
        *_number("one", 1.0, "x"), *_number("half", 0.5, "x"), *squash,
        h.make_node("Add", ["s", "one"], ["s1"]),
        h.make_node("Mul", ["x", "half"], ["hx"]),
        h.make_node("Mul", ["hx", "s1"], ["y"]),
    ]
    return _function(name, ["x"], ["y"], nodes, [], opset)


def gelu(opset: int = 17):
    """Gelu(x) = 0.5 x (1 + erf(x / sqrt 2)): ONNX's Gelu (opset 20) for older opsets. A
    division by sqrt 2, not a product by its inverse: onnxruntime joins this form into its
    own Gelu kernel once it has inlined the function (its GeluFusion reads a Div)."""
    h = _h()
    return _gelu("Gelu", [
        *_number("r2", 1.4142135623730951, "x"),
        h.make_node("Div", ["x", "r2"], ["xs"]),
        h.make_node("Erf", ["xs"], ["s"]),
    ], opset)


def gelu_tanh(opset: int = 17):
    """Gelu(x, approximate='tanh') = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))), in
    the association onnxruntime joins into its FastGelu kernel once it has inlined the function
    (written as sqrt(2/pi) (x + 0.044715 x^3) it stayed nine nodes: GPT-2 ran 1.1x slower)."""
    h = _h()
    return _gelu("GeluTanh", [
        *_number("k", 0.7978845608028654, "x"), *_number("c", 0.044715, "x"),
        h.make_node("Mul", ["x", "c"], ["cx"]),
        h.make_node("Mul", ["cx", "x"], ["cx2"]),
        h.make_node("Add", ["cx2", "one"], ["inner"]),
        h.make_node("Mul", ["x", "k"], ["kx"]),
        h.make_node("Mul", ["kx", "inner"], ["scaled"]),
        h.make_node("Tanh", ["scaled"], ["s"]),
    ], opset)


FUNCTIONS = {
    "Gelu": gelu,
    "GeluTanh": gelu_tanh,
    "BatchnormFprop": batchnorm_fprop,
    "BatchnormBprop": batchnorm_bprop,
    "ReluBprop": relu_bprop,
}
