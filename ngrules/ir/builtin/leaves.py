"""Leaves: placeholders, variables and constants (values fed, held or known)."""

from __future__ import annotations

import numpy as np

from ngrules.errors import OpError
from ngrules.ir import opgen as G
from ngrules.ir.builtin.common import check_dtype, no_grad
from ngrules.ir.ops import AttrSpec, register_op


# -- leaves ------------------------------------------------------------------------------------
def _leaf_infer(args, attrs):
    return attrs["axes"], check_dtype("a leaf", attrs["dtype"])


def _constant_infer(args, attrs):
    value, axes = attrs["value"], attrs["axes"]
    if value.shape != axes.lengths:
        raise OpError(f"Constant: value of shape {value.shape} does not fit axes {axes!r}")
    return axes, check_dtype("Constant", value.dtype)


def _needs_feed(node):
    def missing():
        raise OpError(f"placeholder {node.attrs['name']!r} needs a value")

    return missing


def _variable_infer(args, attrs):
    initial, axes = attrs["initial"], attrs["axes"]
    if initial.shape not in ((), axes.lengths):
        raise OpError(f"Variable: an initial value of shape {initial.shape} does not fit axes "
                      f"{axes!r} (give one number or an array of shape {axes.lengths})")
    return _leaf_infer(args, attrs)


def _variable_kernel(node):
    value = np.full(node.axes.lengths, node.attrs["initial"], dtype=node.dtype)
    return lambda: value


def _constant_kernel(node):
    value = node.attrs["value"]
    return lambda: value


_NAME_AXES_DTYPE = (
    AttrSpec("name", "str", doc="the name feeds use"),
    AttrSpec("axes", "axes"),
    AttrSpec("dtype", "dtype", np.float32),
)

register_op(
    "Placeholder",
    arity=0,
    attrs=_NAME_AXES_DTYPE,
    infer=_leaf_infer,
    kernel=_needs_feed,
    grad=no_grad,
    gen=G.gen_placeholder,
    traits={"leaf"},
    doc="an input fed at run time",
)
register_op(
    "Variable",
    arity=0,
    attrs=_NAME_AXES_DTYPE + (
        AttrSpec("initial", "array", 0.0, "the value: one number, or an array of its shape"),
    ),
    infer=_variable_infer,
    kernel=_variable_kernel,
    grad=no_grad,
    gen=G.gen_variable,
    traits={"leaf"},
    doc="a trainable tensor; fed, or holding `initial` (its value between stateful runs)",
)
register_op(
    "Constant",
    arity=0,
    attrs=(AttrSpec("value", "array"), AttrSpec("axes", "axes", ())),
    infer=_constant_infer,
    kernel=_constant_kernel,
    grad=no_grad,
    gen=G.gen_constant,
    traits={"leaf"},
    doc="a known tensor value",
)
