"""The canonical text of a graph: one line per node in topological order (re-exported by
`graph`; tests and tools compare graphs by it)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ngrules.ir.traversal import toposort

if TYPE_CHECKING:
    from ngrules.ir.graph import Node


def _format_value(value: Any) -> str:
    if isinstance(value, np.ndarray):
        if value.size and np.all(value == value.flat[0]):
            return f"{value.flat[0].item()!r}" + ("" if value.ndim == 0 else f"x{value.shape}")
        return np.array2string(value, separator=",", threshold=8).replace("\n", "")
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, str):
        return repr(value)
    return repr(value)


@functools.cache
def _dtype_name(dtype: np.dtype) -> str:
    return dtype.name  # numpy computes the name afresh (slowly) on every access


def format_node(node: Node, names: Mapping[Node, str]) -> str:
    """`Op(%a, %b, attr=value) : axes dtype` using `names` for the arguments."""
    parts = [names[a] for a in node.args]
    parts += [f"{k}={_format_value(v)}" for k, v in node.attrs.items()]
    if node.outputs is not None:
        typ = "(" + ", ".join(f"{ax!r} {_dtype_name(dt)}" for ax, dt in node.outputs) + ")"
    else:
        typ = f"{node.axes!r} {_dtype_name(node.dtype)}"
    return f"{node.op}({', '.join(parts)}) : {typ}"


def format_graph(outputs: Sequence[Node]) -> str:
    """A canonical listing: one `%k = ...` line per node in topological order, then outputs."""
    names: dict[Node, str] = {}
    lines = []
    for node in toposort(outputs):
        names[node] = f"%{len(names)}"
        lines.append(f"{names[node]} = {format_node(node, names)}")
    lines.append("return " + ", ".join(names[o] for o in outputs))
    return "\n".join(lines)
