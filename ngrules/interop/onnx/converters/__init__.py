"""ONNX node converters by op family; importing this package registers them all."""

from ngrules.interop.onnx.converters import (  # noqa: F401
    arithmetic,
    conv,
    gather,
    generate,
    layout,
    logic,
    mathfn,
    nn,
    shape,
)
