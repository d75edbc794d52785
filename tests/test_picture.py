"""Pictures: DOT text with the graph's nodes, edges, labels and rule colours; optional Graphviz."""

import re
import shutil
import stat
from types import SimpleNamespace

import numpy as np
import pytest

import ngrules as ng
from ngrules.cli.picture import PALETTE, render, rule_colour, to_dot, write_picture

_DECL = re.compile(r'^\s*(n\d+|legend_\w+) \[label="((?:[^"\\]|\\.)*)"(.*)\];$')
_EDGE = re.compile(r"^\s*(\w+) -> (\w+);$")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def _check_syntax(dot: str) -> None:
    """Braces balance outside strings, strings close, and the text is one digraph."""
    depth, in_string, escaped = 0, False, False
    for ch in dot:
        if escaped:
            escaped = False
        elif in_string:
            escaped, in_string = ch == "\\", ch != '"'
        elif ch == '"':
            in_string = True
        elif ch in "{}":
            depth += 1 if ch == "{" else -1
            assert depth >= 0
    assert (depth, in_string) == (0, False)
    assert dot.startswith("digraph ngrules {\n") and dot.endswith("}\n")


def parse(dot: str):
    """(labels by id, attribute text by id, edges); checks each edge joins declared nodes."""
    _check_syntax(dot)
    labels, extras, edges = {}, {}, []
    for line in dot.splitlines():
        if m := _DECL.match(line):
            labels[m.group(1)], extras[m.group(1)] = _unescape(m.group(2)), m.group(3)
        elif m := _EDGE.match(line):
            edges.append((m.group(1), m.group(2)))
    assert all(a in labels and b in labels for a, b in edges)
    return labels, extras, edges


def _graph(tag: str):
    c, n = ng.Axis("C", 4), ng.Axis("N", 8)
    x = ng.placeholder([c, n], name=f"x_{tag}")
    d = ng.dot(ng.constant(np.arange(4.0), [c]), x)
    y = ng.tanh(d)
    return x, d, y, ng.sum(y, out_axes=())


def _by_title(labels):
    """Node ids keyed by the first line of their label (unique in these small graphs)."""
    return {label.split("\n")[0]: k for k, label in labels.items() if not k.startswith("legend")}


def test_nodes_edges_and_labels():
    x, d, y, s = _graph("plain")
    labels, extras, edges = parse(to_dot([y, s]))
    ids = _by_title(labels)
    assert set(ids) == {"Constant", "Placeholder x_plain", "Dot", "Tanh", "Sum"}
    assert labels[ids["Placeholder x_plain"]] == "Placeholder x_plain\n[C:4, N:8] float32"
    assert labels[ids["Dot"]] == "Dot\nreduction_axes=[C:4]\n[N:8] float32"
    assert labels[ids["Sum"]] == "Sum\nreduction_axes=[N:8]\n[] float32\noutput #1"
    assert "value=[0.0, 1.0, 2.0, 3.0]" in labels[ids["Constant"]]
    named = {(labels[a].split("\n")[0], labels[b].split("\n")[0]) for a, b in edges}
    assert named == {
        ("Constant", "Dot"), ("Placeholder x_plain", "Dot"), ("Dot", "Tanh"), ("Tanh", "Sum")
    }  # fmt: skip
    assert len(edges) == 4


def test_outputs_are_marked():
    _, d, y, s = _graph("outputs")
    labels, extras, _ = parse(to_dot([y, s, y]))
    ids = _by_title(labels)
    assert labels[ids["Tanh"]].endswith("\noutput #0, #2")
    marked = {title for title, k in ids.items() if "peripheries=2" in extras[k]}
    assert marked == {"Tanh", "Sum"}


def test_multi_output_nodes_list_each_output():
    x = ng.placeholder({"C": 2, "N": 3}, np.float64, name="bn_x")
    g, b = (ng.placeholder({"C": 2}, np.float64, name=f"bn_{p}") for p in "gb")
    outs = ng.batchnorm_fprop(x, g, b)
    labels, _, edges = parse(to_dot(outs))
    bn = _by_title(labels)["BatchnormFprop"]
    assert labels[bn] == (
        "BatchnormFprop\neps=0.001\n0: [C:2, N:3] float64\n1: [C:2] float64\n2: [C:2] float64"
    )
    assert sum(1 for a, _ in edges if a == bn) == 3


def test_nodes_made_by_rules_are_coloured_and_named():
    x, d, y, s = _graph("origin")
    fold = SimpleNamespace(name="fold_dot", location="rules/cpu.rules:3")
    d.origin = s.origin = fold
    y.origin = SimpleNamespace(name="fuse_tanh", location="rules/cpu.rules:9")
    try:
        labels, extras, _ = parse(to_dot([y, s], title="after"))
    finally:
        d.origin = y.origin = s.origin = None
    ids = _by_title(labels)
    for title, rule in (("Dot", "fold_dot"), ("Sum", "fold_dot"), ("Tanh", "fuse_tanh")):
        assert f'fillcolor="{rule_colour(rule)}"' in extras[ids[title]]
        assert f"\nrule: {rule}" in labels[ids[title]]
    for title in ("Constant", "Placeholder x_origin"):
        assert "fillcolor" not in extras[ids[title]]
    fold_key, fuse_key = "rule fold_dot\nrules/cpu.rules:3", "rule fuse_tanh\nrules/cpu.rules:9"
    legend = {labels[k]: extras[k] for k in labels if re.fullmatch(r"legend_\d+", k)}
    assert legend.keys() == {fold_key, fuse_key}
    assert f'fillcolor="{rule_colour("fuse_tanh")}"' in legend[fuse_key]


def test_rule_colours_are_stable_and_spread():
    assert rule_colour("fold_dot") == "#fccde5"  # a digest of the name, not hash(), so fixed
    assert {rule_colour(f"rule_{k}") for k in range(60)} == set(PALETTE)


def test_title_and_names_are_escaped():
    odd = 'a"b\\c\nd{e}'
    x = ng.placeholder({"C": 2}, name=odd)
    dot = to_dot([ng.tanh(x)], title='say "hi" {now}')
    labels, _, _ = parse(dot)
    assert labels[_by_title(labels)['Placeholder a"b\\c']] == f"Placeholder {odd}\n[C:2] float32"
    assert 'label="say \\"hi\\" {now}"' in dot


def test_graphs_without_rules_still_have_a_legend():
    labels, _, _ = parse(to_dot(list(_graph("legend")[2:])))
    assert labels["legend_output"] == "graph output"
    assert not [k for k in labels if re.fullmatch(r"legend_\d+", k)]


def test_a_hundred_thousand_nodes_without_recursion():
    y = ng.placeholder({"C": 2}, name="long_x")
    for _ in range(100_000):
        y = ng.negative(y)
    dot = to_dot([y])
    assert dot.count(" -> ") == 100_000
    assert len(re.findall(r"^  n\d+ \[", dot, re.M)) == 100_001


# -- rendering ---------------------------------------------------------------------------------
def _fake_dot(tmp_path, monkeypatch, body: str) -> None:
    script = tmp_path / "dot"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(shutil, "which", lambda name: str(script) if name == "dot" else None)


def test_render_without_graphviz_returns_false(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert render(to_dot(list(_graph("nodot")[2:])), tmp_path / "g.svg") is False
    assert list(tmp_path.iterdir()) == []


def test_render_writes_what_dot_draws(tmp_path, monkeypatch):
    _fake_dot(tmp_path, monkeypatch, 'test "$1" = -Tsvg && cat > /dev/null && echo "<svg/>"')
    assert render("digraph ngrules {\n}\n", tmp_path / "g.svg") is True
    assert (tmp_path / "g.svg").read_text() == "<svg/>\n"


@pytest.mark.parametrize(
    "body", ["echo broken >&2; exit 1", "exec sleep 5"], ids=["fails", "hangs"]
)
def test_render_returns_false_when_dot_fails_or_hangs(tmp_path, monkeypatch, body):
    _fake_dot(tmp_path, monkeypatch, body)
    assert render("digraph ngrules {\n}\n", tmp_path / "g.svg", timeout=0.5) is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dot"]


def test_write_picture_writes_dot_and_svg_only_with_graphviz(tmp_path, monkeypatch):
    outputs = list(_graph("write")[2:])
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert write_picture(outputs, tmp_path / "before.dot", title="before") is None
    assert (tmp_path / "before.dot").read_text() == to_dot(outputs, title="before")
    _fake_dot(tmp_path, monkeypatch, 'cat > /dev/null; echo "<svg/>"')
    assert write_picture(outputs, tmp_path / "after.dot") == tmp_path / "after.svg"
    assert (tmp_path / "after.svg").read_text() == "<svg/>\n"
