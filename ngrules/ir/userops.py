"""`ng.register_op`: the op table's `register_op` with defaults for what a user op can leave out.

A fused kernel is usually elementwise: give its numpy function (`compute`) and its gradient,
and the axes inference, the kernel factory and the instance generator follow from the
`elementwise` trait. docs/ops.md shows a whole op in about fifteen lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ngrules.errors import OpError
from ngrules.ir import opgen
from ngrules.ir import ops as table
from ngrules.ir.builtin.common import elementwise_infer
from ngrules.ir.graph import make_node
from ngrules.ir.ops import NotDifferentiable, OpDef


def _kernel_of(compute: Callable) -> Callable:
    """A kernel factory calling `compute(*arrays, **attrs)`."""

    def kernel(node):
        attrs = dict(node.attrs)
        return (lambda *arrays: compute(*arrays, **attrs)) if attrs else compute

    return kernel


def _same_axes_gen(name: str) -> Callable:
    """Instances with every argument on one random set of axes and default attributes."""

    @opgen.leaf_args
    def gen(draw, leaf):
        axes = opgen.some_axes(draw, opgen.axis_pool(draw))
        return make_node(name, tuple(leaf(axes) for _ in range(table.OPS[name].arity or 1)))

    return gen


def register_op(
    name: str,
    *,
    arity: int | None = 1,
    compute: Callable | None = None,
    kernel: Callable | None = None,
    grad: Callable | None = None,
    infer: Callable | None = None,
    gen: Callable | None = None,
    traits: frozenset[str] | set[str] = frozenset(),
    **fields: Any,
) -> OpDef:
    """Add an op to the table; after this, builders, the executor, autodiff, rules and every
    `ngrules` command (through `--ops` or `[tool.ngrules] ops`) know it.

    compute: `fn(*arrays, **attrs)`, the numpy kernel (or give `kernel`, a factory
        `kernel(node) -> fn` that may precompute per node).
    grad: `grad(node, delta)` -> one adjoint node (or None) per argument; default: the op is
        not differentiable, and autodiff says so.
    infer, gen: default for an `elementwise` op: output axes and dtype of its operands, and
        operands on one random set of axes. Other ops must give `infer`; `gen` defaults to
        operands on one random set of axes.
    fields: the other fields of `OpDef` (`attrs`, `domain`, `derived`, `outputs`, `doc`).
    """
    if (compute is None) == (kernel is None):
        raise OpError(f"op {name}: give exactly one of compute (a numpy function) or kernel")
    elementwise = "elementwise" in traits
    if infer is None and not elementwise:
        raise OpError(f"op {name} is missing infer (only an elementwise op can default it)")
    return table.register_op(
        name,
        arity=arity,
        infer=infer or elementwise_infer(name),
        kernel=kernel or _kernel_of(compute),
        grad=grad or NotDifferentiable(f"{name} was registered without a gradient"),
        gen=gen or (opgen.leaf_args(opgen.gen_elementwise(name)) if elementwise
                 else _same_axes_gen(name)),
        traits=traits,
        **fields,
    )
