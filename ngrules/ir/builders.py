"""Every front-end builder in one namespace: the core (`frontend`) and the family modules
(`frontend_math`, `frontend_nn`, ...), which build on the core. Builders that ops' gradients,
the rules language and the public facade call are looked up here."""

from ngrules.ir.frontend import *  # noqa: F401, F403
from ngrules.ir.frontend import Operand, apply_op, elementwise_axes  # noqa: F401
from ngrules.ir.frontend_conv import convolution, pooling  # noqa: F401
from ngrules.ir.frontend_index import (  # noqa: F401
    cast_axes,
    concat_along_axis,
    expand_dims,
    gather,
    getitem,
    pad,
    slice_along_axis,
    slice_axis,
    tensor_slice,
)
from ngrules.ir.frontend_math import (  # noqa: F401
    absolute,
    atan,
    cast,
    ceil,
    cos,
    equal,
    erf,
    floor,
    greater,
    greater_equal,
    isnan,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    mod,
    not_equal,
    power,
    sigmoid,
    sign,
    sin,
    where,
)
from ngrules.ir.frontend_nn import (  # noqa: F401
    axis_index,
    cross_entropy_binary,
    cross_entropy_binary_inner,
    cross_entropy_multi,
    one_hot,
    safelog,
    softmax,
)
from ngrules.ir.frontend_state import (  # noqa: F401
    assign,
    sequential,
    squared_L2,
    tensor_size,
    value_of,
)
