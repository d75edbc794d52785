"""ONNX node converters by op family; importing this package registers them all."""

from ngrules.interop.onnx.converters import (  # noqa: F401
    activations,
    arithmetic,
    attention,
    conv,
    gather,
    generate,
    layout,
    logic,
    losses,
    mathfn,
    nn,
    normalization,
    quantize,
    recurrent,
    resize,
    rotary,
    select,
    sequence,
    shape,
    transpose_conv,
)
