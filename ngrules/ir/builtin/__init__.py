"""The built-in ops, each declared once: axes inference, numpy kernel, gradient, generator.

Semantics follow ngraph-python: elementwise operands carry exactly the output axes (the front
end inserts the broadcasts), `Dot` contracts every axis its operands share, reductions remove
`reduction_axes`, views only relayout. Kernels are factories: `kernel(node)` runs once when a
graph is compiled and returns the function applied to arrays.
"""

from ngrules.ir.builtin import (
    activations,  # noqa: F401
    compare,  # noqa: F401
    convolution,  # noqa: F401
    dynamic,  # noqa: F401
    elementwise,  # noqa: F401
    fused,  # noqa: F401
    gather,  # noqa: F401
    indexing,  # noqa: F401
    integers,  # noqa: F401
    leaves,  # noqa: F401
    logic,  # noqa: F401
    mathops,  # noqa: F401
    pooling,  # noqa: F401
    products,  # noqa: F401
    recurrent,  # noqa: F401
    reductions,  # noqa: F401
    slicing,  # noqa: F401
    sorting,  # noqa: F401
    state,  # noqa: F401
    views,  # noqa: F401
)
