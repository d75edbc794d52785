"""Passes over the written model, after the writers: constants and
transposes joined, channel shuffles absorbed, GELU chains and onnxruntime's contrib ops joined,
unit reshapes named, an older opset's forms, outputs named and the unread dropped, and the last
check that onnx and onnxruntime accept the model.
"""
