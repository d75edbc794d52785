"""Interchange with other formats (ONNX), reading and writing only the IR.

`importer` (`from_onnx`) and `exporter` (`to_onnx`) drive `importing/` (the model read, its
axes named, the converters by op family), `composites/` (ops kept whole) and `exporting/` (the
op writers, the passes over the written model); `budget`, `weights` and `written` serve both.
docs/architecture.md names each op family's converter and writers.

Nothing here is imported by `import ngrules`: the facade serves `from_onnx` and `to_onnx`
lazily, so the `onnx` package is needed only when they are used (`pip install 'ngrules[onnx]'`).
Even then `import onnx` is not run: `proto` loads its protobuf classes and C++ checker alone,
`ndarrays` converts tensors.
"""

from ngrules.errors import NgrulesError

INSTALL_HINT = "pip install 'ngrules[onnx]'"


class OnnxError(NgrulesError):
    """An ONNX model ngrules cannot read or a graph it cannot write, with the node named."""


class ShapeMismatch(OnnxError):
    """Values whose shapes do not fit the op that combines them (a model that contradicts
    itself); the importer adds the node's name."""


class UnsupportedOp(OnnxError):
    """An ONNX op (or an attribute value of one) the importer has no translation for."""


def require_onnx() -> None:
    """onnx's protobuf classes and C++ checks loaded (`proto`, not the whole `onnx` package),
    or an error saying how to install onnx."""
    from ngrules.interop.onnx import proto

    proto.load()
