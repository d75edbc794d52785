"""Reading an ONNX model: the file as untrusted input (`loading`, `external`), its
dimensions named by unification (`unify`, `axes`, `flattened`, `shaping`), shape computations
folded at import (`folding`, `symbolic_slices`), and the converters by op family (`converters/`,
their registry and what they see in `context`).

The driver is `interop.onnx.importer` (`from_onnx`). Nothing here imports `composites/` or
`exporting/` (the ONNX layers contract in pyproject.toml).
"""
