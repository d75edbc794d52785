"""Writing the IR as ONNX: what the op writers share (`emitter`), each value's
order of dimensions (`layout`), the writers (`writers/`), fused ops as ONNX functions
(`functions`), symbolic dimensions written back (`dynamic`), and the passes over the written
model (`passes/`).

The driver is `interop.onnx.exporter` (`to_onnx`). May import `importing/` (the forms its
converters build, the marks they leave); never `composites/`, which imports this.
"""
