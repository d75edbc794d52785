"""Graph files: exact round trips of random graphs, located errors for bad files, atomic writes."""

import itertools
import json
import os
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
from helpers import FLOAT_DTYPES, Leaves, single_outputs
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ngrules as ng
from ngrules.errors import GraphFileError, NgrulesError
from ngrules.ir import graph as graph_module
from ngrules.ir import graphfile
from ngrules.ir.graphfile import RuleOrigin, arrays_path, load_graph, save_graph

OP_NAMES = sorted(ng.OPS)
_names = itertools.count()


# -- random graphs ---------------------------------------------------------------------------------
class Pool:
    """A `leaf(axes)` that sometimes reuses an earlier node of the same type, so pieces compose."""

    def __init__(self, draw, dtype):
        self.draw, self.fresh, self.nodes = draw, Leaves(dtype), []

    def __call__(self, axes):
        fits = [n for n in self.nodes if n.axes == axes and n.axes.lengths == axes.lengths
                and n.dtype == self.fresh.dtype]  # not a comparison's bool or an index's int
        if fits and self.draw(st.booleans()):
            return self.draw(st.sampled_from(fits))
        node = self.fresh(axes)
        self.nodes.append(node)
        return node


@st.composite
def op_table_graphs(draw):
    """A few instances of random ops from the op table's generators, sharing inputs."""
    leaf = Pool(draw, draw(st.sampled_from(FLOAT_DTYPES)))
    outputs = []
    for op in draw(st.lists(st.sampled_from(OP_NAMES), min_size=1, max_size=4)):
        node = ng.OPS[op].gen(draw, leaf)
        singles = single_outputs(node)
        leaf.nodes.extend(singles)
        outputs.extend(singles)
        if node.outputs is not None and draw(st.booleans()):
            outputs.append(node)  # a multi-output node may itself be an output
    return outputs


@st.composite
def frontend_graphs(draw):
    """An MLP-like graph from the front end: dot, constants, tanh, sums, flattening, batchnorm."""
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    c, n, d = (ng.Axis(name, draw(st.integers(1, 4))) for name in "CND")
    tag = next(_names)
    x = ng.placeholder([c, n], dtype, name=f"x{tag}")
    w = ng.variable([d, c], dtype, name=f"w{tag}", initial=draw(st.floats(allow_nan=False)))
    bias = draw(hnp.arrays(dtype, (d.length,), elements=st.floats(width=32)))
    h = ng.dot(w, x) + ng.constant(bias, [d], dtype)
    y = ng.tanh(h * 2.0)
    nested = ng.placeholder([[c, n], d], dtype, name=f"f{tag}")
    flat = ng.unflatten(ng.tanh(ng.flatten(nested)))
    gamma, beta = (ng.placeholder([d], dtype, name=f"{p}{tag}") for p in "gb")
    eps = draw(st.floats(min_value=0.0, allow_nan=False))
    return [y, ng.sum(y, out_axes=()), flat, *ng.batchnorm_fprop(h, gamma, beta, eps)]


graphs = st.one_of(op_table_graphs(), frontend_graphs())


def _save_and_load(outputs, fresh: bool):
    """Save, then load, optionally into an empty hash-consing table (forcing re-inference)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "g.json"
        save_graph(path, outputs)
        if not fresh:
            return load_graph(path)
        with mock.patch.object(graph_module, "_INTERN", {}):
            return load_graph(path)


@given(graphs)
def test_round_trip_gives_the_same_nodes(outputs):
    loaded = _save_and_load(outputs, fresh=False)
    assert len(loaded) == len(outputs)
    assert all(a is b for a, b in zip(loaded, outputs))


def _as_recorded(origin):
    """An origin as a file records it: nodes are shared between tests, so one may carry the
    `Rule` another test's rewrite gave it, which comes back as its name and location."""
    if origin is None or isinstance(origin, RuleOrigin):
        return origin
    location = getattr(origin, "location", None)
    return RuleOrigin(origin.name, location if isinstance(location, str) else "<unknown>")


@given(graphs, st.data())
def test_round_trip_rebuilds_equal_graphs_and_origins(outputs, data):
    nodes = ng.toposort(outputs)
    marked = data.draw(st.lists(st.sampled_from(nodes), unique=True, max_size=3), label="marked")
    before = [(node, node.origin) for node in marked]
    try:
        for k, node in enumerate(marked):
            node.origin = RuleOrigin(f"rule_{k}", f"lib/r{k}.rules:{k + 1}")
        loaded = _save_and_load(outputs, fresh=True)
        assert ng.format_graph(loaded) == ng.format_graph(outputs)
        assert not any(a is b for a, b in zip(loaded, outputs))
        ng.validate(loaded)
        origins = [n.origin for n in ng.toposort(loaded)]
        assert origins == [_as_recorded(n.origin) for n in nodes]
    finally:
        for node, origin in before:
            node.origin = origin


def test_a_deep_chain_round_trips_without_recursion(tmp_path):
    x = ng.placeholder({"C": 2}, name="deep_x")
    y = x
    for _ in range(30_000):
        y = ng.tanh(y)
    save_graph(tmp_path / "deep.json", [y])
    with mock.patch.object(graph_module, "_INTERN", {}):
        (loaded,) = load_graph(tmp_path / "deep.json")
    assert loaded is not y and len(ng.toposort([loaded])) == 30_001


# -- the format itself ---------------------------------------------------------------------------
def _reference_graph():
    """Constant, x, Dot, Sum, Flatten, Slice, Variable: ids 0-6 in that order."""
    c, n = ng.Axis("C", 4), ng.Axis("N", 8)
    x = ng.placeholder([c, n], name="x_ref")
    s = ng.sum(ng.dot(ng.constant(np.arange(4.0), [c]), x), out_axes=())
    sliced = ng.make_node("Slice", (x,), position=1, start=0, stop=2, axis=ng.Axis("M", 2))
    return [s, ng.flatten(x), sliced, ng.variable([c], name="v_ref", initial=0.5)]


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "g.json"
    outputs = _reference_graph()
    save_graph(path, outputs)
    return path, outputs


def _doc(path):
    return json.loads(path.read_text())


def test_the_file_lists_nodes_in_order_with_encoded_attributes(saved):
    path, outputs = saved
    doc = _doc(path)
    assert (doc["format"], doc["version"], doc["outputs"]) == ("ngrules-graph", 1, [3, 4, 5, 6])
    ops = [(r["id"], r["op"], r["args"]) for r in doc["nodes"]]
    assert ops == [
        (0, "Constant", []),
        (1, "Placeholder", []),
        (2, "Dot", [0, 1]),
        (3, "Sum", [2]),
        (4, "Flatten", [1]),
        (5, "Slice", [1]),
        (6, "Variable", []),
    ]
    c, n = {"name": "C", "length": 4}, {"name": "N", "length": 8}
    assert doc["nodes"][1]["attrs"] == {"name": "x_ref", "axes": [c, n], "dtype": "float32"}
    assert doc["nodes"][4]["attrs"] == {
        "axes": [{"name": "C*N", "length": 32, "components": [c, n]}]
    }
    assert doc["nodes"][5]["attrs"] == {
        "position": 1, "start": 0, "stop": 2, "axis": {"name": "M", "length": 2}
    }  # fmt: skip
    assert doc["nodes"][0]["attrs"]["value"] == {"array": "n0_value", "dtype": "float32",
                                                 "shape": [4]}  # fmt: skip
    with np.load(arrays_path(path), allow_pickle=False) as npz:
        np.testing.assert_array_equal(npz["n0_value"], np.arange(4.0, dtype=np.float32))


def test_origins_are_saved_as_rule_and_location(tmp_path):
    x = ng.placeholder({"C": 3}, name="origin_x")
    y = ng.tanh(x)
    y.origin = SimpleNamespace(name="fuse_tanh", location="rules/cpu.rules:12")
    save_graph(tmp_path / "g.json", [y])
    record = _doc(tmp_path / "g.json")["nodes"][1]
    assert record["origin"] == {"rule": "fuse_tanh", "location": "rules/cpu.rules:12"}
    assert "origin" not in _doc(tmp_path / "g.json")["nodes"][0]
    (same,) = load_graph(tmp_path / "g.json")
    assert same is y and same.origin.name == "fuse_tanh"  # a live node keeps its own origin


def test_non_finite_floats_are_strings_in_the_file(tmp_path):
    x = ng.placeholder({"C": 2}, name="x_inf")
    r = ng.make_node("Relu", (x,), slope=float("-inf"))
    save_graph(tmp_path / "g.json", [r])
    assert _doc(tmp_path / "g.json")["nodes"][1]["attrs"]["slope"] == "-inf"
    assert load_graph(tmp_path / "g.json") == [r]


def test_a_variables_initial_value_written_as_a_number_still_loads(tmp_path):
    """Files from before initial values were arrays hold one number (or its string)."""
    v = ng.variable({"C": 2}, name="inf_v", initial=float("-inf"))
    save_graph(tmp_path / "g.json", [v])
    doc = _doc(tmp_path / "g.json")
    doc["nodes"][0]["attrs"]["initial"] = "-inf"
    (tmp_path / "g.json").write_text(json.dumps(doc))
    (loaded,) = load_graph(tmp_path / "g.json")
    assert loaded.attrs["initial"] == -np.inf and loaded.axes == v.axes


def test_arrays_file_name_follows_the_graph_file():
    assert arrays_path("a/g.json") == Path("a/g.npz")
    assert arrays_path("a/g.graph") == Path("a/g.graph.npz")


def test_a_graph_file_need_not_end_in_json(tmp_path):
    outputs = _reference_graph()
    save_graph(tmp_path / "model.graph", outputs)
    assert sorted(os.listdir(tmp_path)) == ["model.graph", "model.graph.npz"]
    assert load_graph(tmp_path / "model.graph") == outputs


def test_saved_files_get_the_usual_permissions(saved):
    path, _ = saved
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    assert arrays_path(path).stat().st_mode & 0o777 == 0o666 & ~umask


# -- bad input -----------------------------------------------------------------------------------
def _edit(path, change):
    doc = _doc(path)
    change(doc)
    path.write_text(json.dumps(doc))


def _error(path) -> GraphFileError:
    with pytest.raises(GraphFileError) as info:
        load_graph(path)
    assert isinstance(info.value, NgrulesError)
    return info.value


def _node(k, key, value):
    def change(doc):
        doc["nodes"][k][key] = value

    return change


def _attr(k, key, value):
    def change(doc):
        doc["nodes"][k]["attrs"][key] = value

    return change


C4, C5, N8 = ({"name": n, "length": k} for n, k in (("C", 4), ("C", 5), ("N", 8)))

NODE_ERRORS = [
    (_node(2, "op", "Zzyzx"), "node 2: unknown op 'Zzyzx'"),
    (_node(2, "op", "Dott"), "node 2: unknown op 'Dott' (did you mean 'Dot'?)"),
    (_attr(3, "foo", 1), "node 3 (Sum): unknown attribute 'foo'"),
    (_attr(3, "reduction_axes", 5), "node 3 (Sum): attribute 'reduction_axes': "
     "expected a list of axes, got 5"),
    (_attr(1, "name", 7), "node 1 (Placeholder): attribute 'name': expected a string, got 7"),
    (_attr(1, "dtype", "float33"), "node 1 (Placeholder): attribute 'dtype': "
     'expected a dtype, got "float33"'),
    (_attr(5, "position", "1"), "node 5 (Slice): attribute 'position': "
     'expected an integer, got "1"'),
    (_attr(5, "start", True), "node 5 (Slice): attribute 'start': expected an integer, got true"),
    (_attr(6, "initial", "x"), "node 6 (Variable): attribute 'initial': "
     'expected a number, got "x"'),
    (_attr(1, "axes", [C4, C5]), "node 1 (Placeholder): attribute 'axes': "
     "axis 'C' has two lengths, 4 and 5"),
    (_attr(1, "axes", [C4, C4]), "node 1 (Placeholder): attribute 'axes': "
     "axis 'C' appears twice in ['C', 'C']"),
    (_attr(1, "axes", [{"name": "C", "length": 0}]), "node 1 (Placeholder): attribute 'axes': "
     "expected a positive integer length for axis 'C', got 0"),
    (_attr(1, "axes", [{"name": "C", "size": 4}]), "node 1 (Placeholder): attribute 'axes': "
     "unknown key 'size' in an axis"),
    (_attr(4, "axes", [{"name": "C*N", "length": 33, "components": [C4, N8]}]),
     "node 4 (Flatten): attribute 'axes': flattened axis C*N:33 does not match its components "
     "(C*N):32"),
    (_attr(3, "reduction_axes", [{"name": "N", "length": 9}]),
     "node 3 (Sum): Sum: axis 'N' has length 9 and 8"),
    (_node(2, "args", [0, 7]), "node 2 (Dot): argument 7 is not a node defined before this one"),
    (_node(2, "args", [0, 3]), "node 2 (Dot): argument 3 is not a node defined before this one"),
    (_node(2, "args", [0, "1"]), 'node 2 (Dot): expected a node id as an argument, got "1"'),
    (_node(2, "args", [0]), "node 2 (Dot): Dot takes 2 argument(s), got 1"),
    (_node(2, "id", 1), "node 1 (Dot): id 1 is used twice"),
    (_node(2, "id", None), "nodes[2] (Dot): expected an integer id, got null"),
    (_node(2, "attr", {}), "node 2 (Dot): unknown key 'attr' in a node (did you mean 'attrs'?)"),
    (_node(2, "origin", {"rule": 3}), "node 2 (Dot): expected an origin {rule, location}, "
     'got {"rule": 3}'),
    (_attr(0, "value", {"array": "zzz", "dtype": "float32", "shape": [4]}),
     "node 0 (Constant): attribute 'value': expected an array in the .npz, got \"zzz\""),
    (_attr(0, "value", {"array": "n0_value", "dtype": "float32", "shape": [5]}),
     "node 0 (Constant): attribute 'value': array 'n0_value' is float32 of shape [4] in the "
     ".npz, but the graph says float32 of shape [5]"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), NODE_ERRORS, ids=[m for _, m in NODE_ERRORS])
def test_a_bad_node_is_named_in_the_error(saved, change, message):
    path, _ = saved
    _edit(path, change)
    assert str(_error(path)) == f"{path}: {message}"


def _set(key, value):
    return lambda doc: doc.__setitem__(key, value)


HEADER_ERRORS = [
    (_set("version", 2), "format version 2 is not supported (this reads 1)"),
    (_set("version", "1"), 'format version "1" is not supported (this reads 1)'),
    (_set("format", "other"), "expected format 'ngrules-graph', got \"other\""),
    (lambda doc: doc.pop("outputs"), "missing key 'outputs'"),
    (_set("extra", 1), "unknown key 'extra' in the graph file"),
    (_set("nodes", {}), "expected 'nodes' as a list, got {}"),
    (_set("arrays", {"md5": "x"}), "unknown key 'md5' in 'arrays'"),
    (_set("outputs", [3, 99]), "outputs: 99 is not the id of a node"),
    (_set("nodes", [5]), "nodes[0]: expected a node as a JSON object, got 5"),
]


@pytest.mark.parametrize(("change", "message"), HEADER_ERRORS, ids=[m for _, m in HEADER_ERRORS])
def test_a_bad_document_is_reported(saved, change, message):
    path, _ = saved
    _edit(path, change)
    assert str(_error(path)) == f"{path}: {message}"


def test_a_list_at_the_top_is_reported(tmp_path):
    path = tmp_path / "g.json"
    path.write_text("[1, 2]")
    assert str(_error(path)) == f"{path}: expected a JSON object, got [1, 2]"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{\n  "format": "ngrules-graph",\n  "version": 1,,\n}',
         "3:16: error: Expecting property name enclosed in double quotes"),
        ("", "1:1: error: Expecting value"),
    ],
)  # fmt: skip
def test_json_syntax_errors_are_located_by_line_and_column(tmp_path, text, where):
    path = tmp_path / "g.json"
    path.write_text(text)
    error = _error(path)
    assert str(error) == f"{path}:{where}"
    assert (error.span.file, error.span.line) == (str(path), int(where.split(":")[0]))


def test_a_truncated_file_is_located_on_one_line(saved):
    path, _ = saved
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    message = str(_error(path))
    assert re.fullmatch(re.escape(str(path)) + r":\d+:\d+: error: [^\n]+", message)


def test_deeply_nested_json_is_an_error_not_a_crash(tmp_path):
    path = tmp_path / "g.json"
    path.write_text("[" * 200_000)
    assert "nested too deeply" in str(_error(path))


def test_text_that_is_not_utf8_is_reported(tmp_path):
    path = tmp_path / "g.json"
    path.write_bytes(b'{"format": "\xff"}')
    assert str(_error(path)) == f"{path}: not UTF-8 text (byte 12)"


def test_a_missing_graph_file_is_reported(tmp_path):
    path = tmp_path / "nope.json"
    assert str(_error(path)) == f"{path}: cannot read: No such file or directory"


def test_a_missing_arrays_file_is_reported(saved):
    path, _ = saved
    arrays_path(path).unlink()
    assert str(_error(path)) == (
        f"{path}: cannot read its arrays file {arrays_path(path)}: No such file or directory"
    )


def test_an_arrays_file_from_another_save_is_reported(saved, tmp_path):
    path, _ = saved
    save_graph(tmp_path / "other.json", [ng.placeholder({"C": 2}, name="other_x")])
    arrays_path(path).write_bytes(arrays_path(tmp_path / "other.json").read_bytes())
    assert str(_error(path)) == (
        f"{path}: its arrays file {arrays_path(path)} was not saved with it (the sha256 differs)"
    )


def _replace_arrays(path, write):
    """Put other bytes in the arrays file and record their digest, as a forger would."""
    with open(arrays_path(path), "wb") as f:
        write(f)
    _edit(path, _set("arrays", {"sha256": graphfile._sha256(str(arrays_path(path)))}))


def test_arrays_needing_pickle_are_refused(saved):
    path, _ = saved
    objects = np.array([{"evil": 1}, None, 2, 3], dtype=object)
    _replace_arrays(path, lambda f: np.savez(f, n0_value=objects))
    assert str(_error(path)) == (
        f"{path}: node 0 (Constant): attribute 'value': array 'n0_value' in {arrays_path(path)} "
        "cannot be read: its dtype object is not a plain number type (pickles are refused)"
    )


@pytest.mark.parametrize(
    "write",
    [lambda f: f.write(b"not a zip file at all"), lambda f: np.save(f, np.zeros(3))],
    ids=["garbage", "npy"],
)
def test_an_arrays_file_that_is_not_an_npz_is_reported(saved, write):
    path, _ = saved
    _replace_arrays(path, write)
    assert str(_error(path)).startswith(f"{arrays_path(path)}: not a readable .npz file: ")


# -- atomic writes -------------------------------------------------------------------------------
def _fail_json_dump_midway(monkeypatch):
    real, calls = json.dump, []

    def flaky(obj, f, **kw):
        calls.append(obj)
        if len(calls) == 5:  # after the header, at the first node
            f.write('{"id": 0, "op": "Con')
            raise OSError("disk full")
        real(obj, f, **kw)

    monkeypatch.setattr(json, "dump", flaky)


def _fail_savez_midway(monkeypatch):
    def flaky(f, *args, **kw):
        f.write(b"PK\x03\x04 half an archive")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", flaky)


FAILURES = [_fail_json_dump_midway, _fail_savez_midway]


@pytest.mark.parametrize("fail", FAILURES, ids=["json.dump", "np.savez"])
def test_a_failed_save_leaves_no_file(tmp_path, monkeypatch, fail):
    fail(monkeypatch)
    with pytest.raises(OSError, match="disk full"):
        save_graph(tmp_path / "g.json", _reference_graph())
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("fail", FAILURES, ids=["json.dump", "np.savez"])
def test_a_failed_save_leaves_existing_files_untouched(saved, monkeypatch, fail):
    path, outputs = saved
    before = {p: p.read_bytes() for p in (path, arrays_path(path))}
    fail(monkeypatch)
    other = ng.constant(np.ones(3), {"K": 3})
    with pytest.raises(OSError, match="disk full"):
        save_graph(path, [other])
    assert sorted(os.listdir(path.parent)) == ["g.json", "g.npz"]
    assert {p: p.read_bytes() for p in before} == before
    monkeypatch.undo()
    assert load_graph(path) == outputs


def test_saving_over_a_graph_replaces_both_files(saved):
    path, _ = saved
    other = ng.constant(np.full(3, 7.0), {"K": 3})
    save_graph(path, [other])
    assert load_graph(path) == [other]
    assert sorted(os.listdir(path.parent)) == ["g.json", "g.npz"]
