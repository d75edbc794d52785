"""ONNX node converters by op family; importing this package registers them all."""

from ngrules.interop.onnx.converters import arithmetic, conv, nn, shape  # noqa: F401
