"""Pictures of graphs: Graphviz DOT text, and SVG when the `dot` program is installed.

Nodes a rewrite created (their `.origin` is set) are filled with a colour chosen from the rule's
name, so the same rule has the same colour in every picture, and carry the rule's name; a legend
lists the rules with their `file:line`. Graphviz is optional: `draw_svg` says why it did not
draw (not installed, failed, timed out), and the DOT text is written in any case.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ngrules.ir.axes import Axes, Axis
from ngrules.ir.fileio import check_output, staged_files
from ngrules.ir.graph import Node, toposort
from ngrules.ir.ops import get_op
from ngrules.lang.library import short_location

#: Pastel fills (ColorBrewer Set3 and Pastel1) that keep black text readable.
PALETTE = (
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69",
    "#fccde5", "#bc80bd", "#ccebc5", "#ffed6f", "#decbe4", "#fed9a6", "#e5d8bd",
)  # fmt: skip

#: Seconds Graphviz may take to draw a picture before only the DOT text is kept.
DOT_TIMEOUT = 60.0

_HIDDEN_ATTRS = ("name", "axes", "dtype")  # the title line and the type line show these
_MAX_VALUE = 48
#: Arrays up to this many elements are shown by their values.
_LISTED_ELEMENTS = 8


def rule_colour(name: str) -> str:
    """The fill for nodes made by rule `name`; a digest, not hash(), so it is stable across runs."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()
    return PALETTE[int.from_bytes(digest[:4], "big") % len(PALETTE)]


def escape(text: str) -> str:
    """Text as the inside of a DOT double-quoted string; newlines become centred line breaks.

    Characters UTF-8 cannot encode (lone surrogates) become `\\udXXX` escapes.
    """
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")


def _short(value: Any) -> str:
    """An attribute value in a few characters: axes as `[C:4, N:8]`, arrays by value or shape."""
    if isinstance(value, (Axes, Axis)):
        text = repr(value)
    elif isinstance(value, np.ndarray):
        text = _array_text(value)
    elif isinstance(value, np.dtype):
        text = value.name
    else:
        text = repr(value)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 3] + "..."


def _array_text(value: np.ndarray) -> str:
    """A small array by its values (`[1, 0, 2]`, never read as a scalar); a large one by dtype and
    shape, with its value when every element is the same (`float32[4, 8] all 1.0`)."""
    if value.size <= _LISTED_ELEMENTS:
        return repr(value.tolist()) if value.ndim else repr(value.item())
    flat = value.reshape(-1)
    head = f"{value.dtype.name}{list(value.shape)}"
    return f"{head} all {flat[0].item()!r}" if bool(np.all(flat == flat[0])) else head


@functools.cache
def _dtype_name(dtype: np.dtype) -> str:
    return dtype.name  # numpy computes the name afresh each time; big graphs notice


def _type_lines(node: Node) -> list[str]:
    if node.outputs is None:
        return [f"{node.axes!r} {_dtype_name(node.dtype)}"]
    return [f"{i}: {ax!r} {_dtype_name(dt)}" for i, (ax, dt) in enumerate(node.outputs)]


def rule_name(node: Node) -> str | None:
    if node.origin is None:
        return None
    name = getattr(node.origin, "name", None)
    return name if isinstance(name, str) else str(node.origin)


def attribute_text(node: Node) -> list[str]:
    """`key=value` for each attribute but name, axes and dtype (and Dot's reduction axes)."""
    lines = [f"{k}={_short(v)}" for k, v in node.attrs.items() if k not in _HIDDEN_ATTRS]
    derived = get_op(node.op).derived.get("reduction_axes")
    if derived is not None:
        lines.append(f"reduction_axes={_short(derived(node))}")
    return lines


def node_label(node: Node) -> str:
    """Op and name, the other attributes, the output type, and the rule that made it."""
    lines = [f"{node.op} {node.name}" if node.name else node.op]
    lines += attribute_text(node)
    lines += _type_lines(node)
    rule = rule_name(node)
    if rule is not None:
        lines.append(f"rule: {rule}")
    return "\n".join(lines)


def _node_line(ident: str, node: Node, output_marks: list[int]) -> str:
    label = node_label(node)
    style = ["rounded"]
    extra = ""
    if output_marks:
        label += "\noutput " + ", ".join(f"#{i}" for i in output_marks)
        extra += ", peripheries=2, penwidth=2"
    rule = rule_name(node)
    if rule is not None:
        style.append("filled")
        extra += f', fillcolor="{rule_colour(rule)}"'
    return f'  {ident} [label="{escape(label)}", style="{",".join(style)}"{extra}];'


_OUTPUT_NOTE = (
    "Output index=i\nreads output i of a multi-output node\n(e.g. a fused BatchnormBprop)"
)
_FLAT_NOTE = (
    "(A*B):6  axes A and B flattened into one axis\n"
    "((A)):3  axis A alone, flattened (a 2-D view)"
)


def _flattened(node: Node) -> bool:
    types = [node.axes] if node.outputs is None else [ax for ax, _ in node.outputs]
    return any(a.is_flattened for axes in types for a in axes)


def _notes(nodes: Sequence[Node]) -> list[str]:
    """Legend entries explaining what this picture shows: Output nodes, flattened axes."""
    lines = []
    if any(n.op == "Output" for n in nodes):
        lines.append(f'    legend_outputs [label="{escape(_OUTPUT_NOTE)}", shape=note];')
    if any(_flattened(n) for n in nodes):
        lines.append(f'    legend_flattened [label="{escape(_FLAT_NOTE)}", shape=note];')
    return lines


def _legend(rules: dict[str, str], nodes: Sequence[Node] = ()) -> list[str]:
    """A cluster with one swatch per rule (name and `file:line`), one for outputs, and notes
    on `Output` nodes and flattened-axis labels when the picture has them."""
    lines = [
        "  subgraph cluster_legend {",
        '    label="legend"; style="dashed"; fontsize=10;',
        '    legend_output [label="graph output", style="rounded", peripheries=2, penwidth=2];',
        '    legend_plain [label="original node", style="rounded"];',
        *_notes(nodes),
    ]
    for k, (name, location) in enumerate(sorted(rules.items())):
        label = escape(f"rule {name}\n{location}")
        lines.append(
            f'    legend_{k} [label="{label}", style="rounded,filled", '
            f'fillcolor="{rule_colour(name)}"];'
        )
    lines.append("  }")
    return lines


def _rules_used(nodes: Sequence[Node]) -> dict[str, str]:
    rules: dict[str, str] = {}
    for node in nodes:
        name = rule_name(node)
        if name is not None:
            location = getattr(node.origin, "location", None)
            shown = short_location(location) if isinstance(location, str) else "<unknown>"
            rules.setdefault(name, shown)
    return rules


def to_dot(outputs: Sequence[Node], title: str | None = None) -> str:
    """Graphviz DOT text for the graph under `outputs`: one box per node, edges arg -> user."""
    outputs = list(outputs)
    nodes = toposort(outputs)
    ids = {node: f"n{k}" for k, node in enumerate(nodes)}
    marks: dict[Node, list[int]] = {}
    for i, out in enumerate(outputs):
        marks.setdefault(out, []).append(i)
    lines = ["digraph ngrules {", '  graph [rankdir=TB, fontname="Helvetica"];']
    if title is not None:
        lines.append(f'  graph [label="{escape(title)}", labelloc=t, fontsize=14];')
    lines.append('  node [shape=box, fontname="Helvetica", fontsize=10];')
    lines += [_node_line(ids[n], n, marks.get(n, [])) for n in nodes]
    lines += [f"  {ids[a]} -> {ids[n]};" for n in nodes for a in n.args]
    lines += _legend(_rules_used(nodes), nodes)
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw_svg(dot_text: str, timeout: float = DOT_TIMEOUT) -> tuple[bytes | None, str]:
    """Graphviz's SVG for DOT text, or None and why not (never an exception)."""
    exe = shutil.which("dot")
    if exe is None:
        return None, "install Graphviz to render SVG"
    import subprocess  # here: 3 ms that a command drawing no picture need not spend

    try:
        done = subprocess.run(
            [exe, "-Tsvg"], input=dot_text.encode("utf-8"), capture_output=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None, f"Graphviz timed out after {timeout:g} s; the DOT file is kept"
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"Graphviz could not run: {e}"
    if done.returncode != 0 or not done.stdout:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return None, "Graphviz failed" + (f": {said[0]}" if said else "")
    return done.stdout, ""


def render(dot_text: str, path_svg: str | os.PathLike, timeout: float = DOT_TIMEOUT) -> bool:
    """Draw DOT text as SVG with Graphviz; False (never an exception) when it could not.

    False means Graphviz's `dot` is not installed, failed or timed out; nothing is written
    then, so callers can note that only the DOT text is available.
    """
    svg, _ = draw_svg(dot_text, timeout)
    if svg is None:
        return False
    try:
        with staged_files() as stage:
            stage(path_svg, lambda f: f.write(svg))
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class Picture:
    """A graph drawn: its DOT text, its SVG (None without Graphviz), and why there is none."""

    dot: str
    svg: bytes | None
    note: str


def draw(outputs: Sequence[Node], title: str | None = None, timeout: float = DOT_TIMEOUT):
    """The picture of a graph, in memory, so it can be written together with other files."""
    text = to_dot(outputs, title)
    return Picture(text, *draw_svg(text, timeout))


def svg_path(path_dot: str | os.PathLike) -> Path:
    """Where the SVG of a picture goes: beside the DOT file."""
    return Path(path_dot).with_suffix(".svg")


def stage_picture(stage: Callable[..., str], picture: Picture, path_dot: str | os.PathLike):
    """Stage the DOT file and the SVG (if drawn) with `stage` from `staged_files`."""
    stage(path_dot, lambda f: f.write(picture.dot), text=True)
    if picture.svg is not None:
        stage(svg_path(path_dot), lambda f: f.write(picture.svg))


def picture_line(picture: Picture, path_dot: str | os.PathLike) -> str:
    """What a command prints after writing a picture: the SVG, or the DOT file and why only it."""
    if picture.svg is not None:
        return f"picture: {svg_path(path_dot)}"
    return f"picture: {path_dot} ({picture.note})"


def picture_files(path_dot: str | os.PathLike) -> list:
    """The files a picture at `path_dot` may write (for `check_outputs` before any work), once
    `path_dot` is checked to be writable (first: "" or "/" have no SVG file to name)."""
    check_output(path_dot)
    return [path_dot, svg_path(path_dot)]


def save_picture(
    outputs: Sequence[Node], path_dot: str | os.PathLike, title: str | None = None
) -> Picture:
    """Draw the graph and write the DOT file, and the SVG beside it when Graphviz drew it."""
    picture = draw(outputs, title)
    with staged_files() as stage:
        stage_picture(stage, picture, path_dot)
    return picture


def write_picture(
    outputs: Sequence[Node], path_dot: str | os.PathLike, title: str | None = None
) -> Path | None:
    """Write the DOT file, and the SVG beside it when Graphviz can draw it (its path, or None)."""
    picture = save_picture(outputs, path_dot, title)
    return svg_path(path_dot) if picture.svg is not None else None
