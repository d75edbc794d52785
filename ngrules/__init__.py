"""ngrules: a declarative rewrite-rule language for named-axes tensor-graph compilers."""

from ngrules.cli.picture import render as render_dot
from ngrules.cli.picture import to_dot, write_picture
from ngrules.engine.driver import Firing, RewriteResult, rewrite
from ngrules.engine.explain import Explanation, explain
from ngrules.errors import (
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
from ngrules.ir import builtin as _builtin  # noqa: F401  (fills the op table)
from ngrules.ir.autodiff import deriv
from ngrules.ir.axes import Axes, Axis, FlattenedAxis, make_axes, make_axis
from ngrules.ir.executor import Program, compile_graph, execute
from ngrules.ir.frontend import (
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
from ngrules.ir.graph import Graph, Node, format_graph, make_node, substitute, toposort, validate
from ngrules.ir.graphfile import load_graph, save_graph
from ngrules.ir.ops import OPS, AttrSpec, NotDifferentiable, OpDef, register_op
from ngrules.lang import functions
from ngrules.lang.functions import register_function
from ngrules.lang.loader import load_rules, parse_rules
from ngrules.lang.rules import Rule, RuleSet
from ngrules.version import __version__  # noqa: F401

#: Names served on first use, so `import ngrules` does not import hypothesis.
_LAZY = {
    "testing": ("ngrules.testing", None),
    "check_rewrite": ("ngrules.verification.testing", "check_rewrite"),
    "verify": ("ngrules.verification.verify", "verify"),
    "VerificationReport": ("ngrules.verification.verdicts", "VerificationReport"),
    "Verdict": ("ngrules.verification.verdicts", "Verdict"),
    "Counterexample": ("ngrules.verification.verdicts", "Counterexample"),
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
