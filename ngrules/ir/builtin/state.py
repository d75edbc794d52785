"""State: ngraph's `assign`, `sequential` and `value_of`, as values in a pure graph.

A graph stays a DAG of immutable nodes; state is threaded through it. `Assign(v, value)` is the
new value of variable `v` (reads after it, in a `sequential`, read this node instead of `v`);
`Sequential(result, *effects)` is its first argument's value and carries what else the run
computes, the assignments in order; `ValueOf(x)` is x as read where it stands (a node of its
own, so reads threaded through a `sequential` never reach it twice). The stateful executor
(`ngrules.ir.stateful`) keeps each variable's value between runs and stores the assignments.
"""

from __future__ import annotations

from ngrules.errors import OpError
from ngrules.ir import opgen as G
from ngrules.ir.graph import make_node
from ngrules.ir.ops import register_op


def _assign_infer(args, attrs):
    variable, value = args
    if variable.op not in ("Variable", "Placeholder"):  # a placeholder: a rule's instance
        raise OpError(f"Assign: the first argument must be a variable, got {variable.op}")
    if value.axes != variable.axes or value.dtype != variable.dtype:
        raise OpError(f"Assign: the value's axes and dtype ({value.axes!r} {value.dtype}) must "
                      f"be the variable's ({variable.axes!r} {variable.dtype})")
    return variable.axes, variable.dtype


def _sequential_infer(args, attrs):
    if not args:
        raise OpError("Sequential needs at least one argument (its result)")
    return args[0].axes, args[0].dtype


def _gen_variable(draw, leaf):
    x = leaf(G.some_axes(draw, G.axis_pool(draw)))
    return make_node("Variable", name="v", axes=x.axes, dtype=x.dtype, initial=0.5), x


def _gen_assign(draw, leaf):
    return make_node("Assign", _gen_variable(draw, leaf))


def _gen_sequential(draw, leaf):
    variable, value = _gen_variable(draw, leaf)
    return make_node("Sequential", (value * 2.0, make_node("Assign", (variable, value))))


def _gen_value_of(draw, leaf):
    return make_node("ValueOf", (leaf(G.some_axes(draw, G.axis_pool(draw))),))


register_op(
    "Assign",
    arity=2,
    infer=_assign_infer,
    kernel=lambda node: lambda variable, value: value,
    grad=lambda n, d: (None, d),
    gen=_gen_assign,
    doc="the new value of a variable: `value`, stored when the run ends",
)
register_op(
    "Sequential",
    arity=None,
    infer=_sequential_infer,
    kernel=lambda node: lambda result, *assigns: result,
    grad=lambda n, d: (d, *([None] * (len(n.args) - 1))),
    gen=_gen_sequential,
    doc="the value of its first argument; the rest run too (assignments stored in order)",
)
register_op(
    "ValueOf",
    arity=1,
    infer=lambda args, attrs: (args[0].axes, args[0].dtype),
    kernel=lambda node: lambda x: x,
    grad=lambda n, d: (d,),
    gen=_gen_value_of,
    doc="x as read where it stands in a sequential (later assignments do not change it)",
)
