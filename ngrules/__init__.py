"""ngrules: a declarative rewrite-rule language for named-axes tensor-graph compilers."""

from . import builtin_ops as _builtin_ops  # noqa: F401  (fills the op table)
from .autodiff import deriv
from .axes import Axes, Axis, FlattenedAxis, make_axes, make_axis
from .errors import (
    AxesError,
    ExecutionError,
    GraphError,
    NgrulesError,
    OpError,
    RuleError,
    RuleErrors,
    Span,
)
from .executor import Program, compile_graph, execute
from .frontend import (
    add,
    axes_with_order,
    batchnorm_bprop,
    batchnorm_fprop,
    broadcast,
    concat_along_axis,
    constant,
    divide,
    dot,
    exp,
    flatten,
    flatten_at,
    greater,
    less,
    log,
    max,
    maximum,
    mean,
    min,
    minimum,
    multiply,
    negative,
    outputs_of,
    placeholder,
    prod,
    reciprocal,
    sqrt,
    square,
    subtract,
    sum,
    tanh,
    tensor_slice,
    transpose,
    unflatten,
    variable,
    variance,
)
from .graph import Graph, Node, format_graph, make_node, substitute, toposort, validate
from .ops import OPS, AttrSpec, NotDifferentiable, OpDef, register_op

__version__ = "0.1.0"

__all__ = [
    "OPS", "AttrSpec", "Axes", "Axis", "AxesError", "ExecutionError", "FlattenedAxis", "Graph",
    "GraphError", "Node", "NgrulesError", "NotDifferentiable", "OpDef", "OpError", "Program",
    "RuleError", "RuleErrors", "Span", "add", "axes_with_order", "batchnorm_bprop",
    "batchnorm_fprop", "broadcast", "compile_graph", "concat_along_axis", "constant", "deriv",
    "divide", "dot", "execute", "exp", "flatten", "flatten_at", "format_graph", "greater", "less",
    "log", "make_axes", "make_axis", "make_node", "max", "maximum", "mean", "min", "minimum",
    "multiply", "negative", "outputs_of", "placeholder", "prod", "reciprocal", "register_op",
    "sqrt", "square", "substitute", "subtract", "sum", "tanh", "tensor_slice", "toposort",
    "transpose", "unflatten", "validate", "variable", "variance",
]
