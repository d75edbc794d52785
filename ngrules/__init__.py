"""ngrules: a declarative rewrite-rule language for named-axes tensor-graph compilers."""

from . import builtin_ops as _builtin_ops  # noqa: F401  (fills the op table)
from . import functions
from .autodiff import deriv
from .axes import Axes, Axis, FlattenedAxis, make_axes, make_axis
from .engine import Firing, RewriteResult, rewrite
from .errors import (
    AxesError,
    ExecutionError,
    GraphError,
    GraphFileError,
    NgrulesError,
    OpError,
    RuleError,
    RuleErrors,
    RuleSyntaxError,
    Span,
)
from .executor import Program, compile_graph, execute
from .explain import Explanation, explain
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
from .functions import register_function
from .graph import Graph, Node, format_graph, make_node, substitute, toposort, validate
from .graphfile import load_graph, save_graph
from .loader import load_rules, parse_rules
from .ops import OPS, AttrSpec, NotDifferentiable, OpDef, register_op
from .picture import render as render_dot
from .picture import to_dot, write_picture
from .rules import Rule, RuleSet

__version__ = "0.1.0"

#: Names served on first use, so `import ngrules` does not import hypothesis.
_LAZY = {
    "testing": ("ngrules.testing", None),
    "check_rewrite": ("ngrules.testing", "check_rewrite"),
    "verify": ("ngrules.verify", "verify"),
    "VerificationReport": ("ngrules.verify", "VerificationReport"),
    "Verdict": ("ngrules.verify", "Verdict"),
    "Counterexample": ("ngrules.verify", "Counterexample"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'ngrules' has no attribute {name!r}")
    import importlib

    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    return module if attr is None else getattr(module, attr)

__all__ = [
    "Counterexample",
    "VerificationReport",
    "Verdict",
    "check_rewrite",
    "testing",
    "verify",
    "RuleSyntaxError",
    "GraphFileError",
    "load_graph",
    "render_dot",
    "save_graph",
    "to_dot",
    "write_picture",
    "Explanation",
    "Firing",
    "RewriteResult",
    "Rule",
    "RuleSet",
    "explain",
    "functions",
    "load_rules",
    "parse_rules",
    "register_function",
    "rewrite",
    "OPS",
    "AttrSpec",
    "Axes",
    "Axis",
    "AxesError",
    "ExecutionError",
    "FlattenedAxis",
    "Graph",
    "GraphError",
    "Node",
    "NgrulesError",
    "NotDifferentiable",
    "OpDef",
    "OpError",
    "Program",
    "RuleError",
    "RuleErrors",
    "Span",
    "add",
    "axes_with_order",
    "batchnorm_bprop",
    "batchnorm_fprop",
    "broadcast",
    "compile_graph",
    "concat_along_axis",
    "constant",
    "deriv",
    "divide",
    "dot",
    "execute",
    "exp",
    "flatten",
    "flatten_at",
    "format_graph",
    "greater",
    "less",
    "log",
    "make_axes",
    "make_axis",
    "make_node",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "multiply",
    "negative",
    "outputs_of",
    "placeholder",
    "prod",
    "reciprocal",
    "register_op",
    "sqrt",
    "square",
    "substitute",
    "subtract",
    "sum",
    "tanh",
    "tensor_slice",
    "toposort",
    "transpose",
    "unflatten",
    "validate",
    "variable",
    "variance",
]
