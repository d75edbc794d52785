"""The IR layer: named axes, immutable hash-consed graphs, the op table and its built-in ops,
the front end, autodiff, the numpy executor and graph files. Imports nothing above it."""
