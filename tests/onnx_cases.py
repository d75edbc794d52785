"""One ONNX node checked against onnxruntime: imported and executed by ngrules, and exported
back to ONNX and run by onnxruntime again (the round trip the new converters must survive)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper, shape_inference

import ngrules as ng
from ngrules.interop.onnx.exporter import to_onnx
from ngrules.interop.onnx.importer import import_model
from ngrules.ir.composite import decompose


def node_model(op: str, feeds: dict, inits: dict | None = None, n_out: int = 1,
               opset: int = 17, **attrs):
    """A model of one `op` node over the named inputs (feeds) and initializers (inits)."""
    inits = inits or {}
    names = list(feeds) + list(inits)
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, name="n", **attrs)
    inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for k, v in feeds.items()]
    outputs = [helper.make_tensor_value_info(o, 0, None) for o in outs]
    graph = helper.make_graph([node], "t", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = shape_inference.infer_shapes(model)  # the outputs' types
    for out in model.graph.output:  # where inference could not tell: the first input's
        if not out.type.tensor_type.elem_type or not out.type.tensor_type.HasField("shape"):
            out.type.CopyFrom(inputs[0].type)
    return model


def run_ort(model, feeds: dict) -> list:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in wanted})


def check_against_ort(model, feeds: dict, rtol=1e-4, atol=1e-5, export: bool = True) -> list:
    """Import, execute and compare with onnxruntime; then export, run and compare again.
    Returns the imported output nodes, composites decomposed (the primitives the converters
    write, which the tests read)."""
    want = run_ort(model, feeds)
    imported = import_model(model)
    used = {n.attrs["name"] for n in ng.toposort(imported.outputs) if n.op == "Placeholder"}
    got = ng.execute(imported.outputs, {k: v for k, v in feeds.items() if k in used})
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    if export:
        back = run_ort(to_onnx(imported.outputs, output_names=imported.output_names), feeds)
        for g, w in zip(back, want):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return decompose(imported.outputs, record=False)
