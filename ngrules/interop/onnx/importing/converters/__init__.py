"""ONNX node converters by op family; importing this package registers them all.

docs/architecture.md names, per family, its converter here and its writers in
`exporting/writers/`."""

from ngrules.interop.onnx.importing.converters import (  # noqa: F401
    activations,
    arithmetic,
    attention,
    conv,
    gather,
    generate,
    grid_sample,
    grids,
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
    spectral,
    training,
    transpose_conv,
)
