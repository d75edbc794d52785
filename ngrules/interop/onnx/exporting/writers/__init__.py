"""The exporter's op writers: each ngrules op, or form of ops, written as
ONNX nodes; importing a module registers its writers (the exporter imports them all).
docs/architecture.md names, per ONNX op family, its converter (`importing/converters/`) and
its writers here.
"""
