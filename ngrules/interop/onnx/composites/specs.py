"""A composite's spec (`whole`): its graph as protobuf text, the attribute its node carries,
and the graph that text stands for, each made once per process.

The importer makes a spec graph per node kept whole; a model's nodes of one op, attributes and
shapes share their spec (ResNet-50's 127 composites have 49), so its text is printed once
(printing costs ~10x serialising, the key). A body built again (each `decompose`) reads the
graph kept for its text, or parses the text (a graph file's node) once.
"""

from __future__ import annotations

from ngrules.interop.onnx import proto

#: The most specs (and texts) kept: past it the table is forgotten whole.
LIMIT = 4096

#: spec text -> its graph (read-only), as the importer made it or as parsed.
SPECS: dict[str, object] = {}

#: a spec graph's serialised bytes -> its text.
_TEXTS: dict[bytes, str] = {}


def graph_of(text: str):
    """The spec graph of a composite's `spec` text (read-only)."""
    graph = SPECS.get(text)
    if graph is None:
        from google.protobuf import text_format
        graph = _keep(SPECS, text, text_format.Parse(text, proto.GraphProto()))
    return graph


def text_of(graph) -> str:
    """The spec graph's protobuf text (one line), the graph kept for `graph_of` (the text
    parses back to it)."""
    data = graph.SerializeToString(deterministic=True)
    text = _TEXTS.get(data)
    if text is None:
        from google.protobuf import text_format
        text = _keep(_TEXTS, data, text_format.MessageToString(graph, as_one_line=True))
    if text not in SPECS:
        _keep(SPECS, text, graph)
    return text


def _keep(table: dict, key, value):
    if len(table) >= LIMIT:
        table.clear()
    table[key] = value
    return value
