"""Interchange with other formats, reading and writing only the IR: `onnx/` (import, export,
axes, converters by op family).

Nothing here is imported by `import ngrules`: the facade serves `from_onnx` and `to_onnx`
lazily, so the `onnx` package is needed only when they are used (`pip install 'ngrules[onnx]'`).
"""
