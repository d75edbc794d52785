"""Interchange with other formats, reading and writing only the IR: `onnx/` (the drivers
`importer` and `exporter`; `importing/`, `composites/`, `exporting/`).

Nothing here is imported by `import ngrules`: the facade serves `from_onnx` and `to_onnx`
lazily, so the `onnx` package is needed only when they are used (`pip install 'ngrules[onnx]'`).
"""
