"""Ops that stand for a body of primitives, kept as one node through import,
rules and export: ONNX ops kept whole (`whole`: read as a composite node whose body is the
converter run again, written back as the node) and ops declared in rules files (`declared`:
written as the ONNX op they name, or an ONNX function of their body).

Above `importing/` and `exporting/`, whose machinery they use; the drivers
`interop.onnx.importer` and `interop.onnx.exporter` call them.
"""
