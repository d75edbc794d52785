"""Graph files as an attacker writes them: corrupt archives, lying headers, odd files, races.

Every bad file must give a `GraphFileError` naming the file, quickly and without a traceback
of another kind; writers must leave a readable pair whatever the interleaving.
"""

import copy
import io
import json
import os
import random
import stat
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

import ngrules as ng
from ngrules.errors import GraphFileError
from ngrules.ir import arraysfile, fileio, graphfile
from ngrules.ir.graphfile import arrays_path, load_graph, save_graph


def _graph():
    c, n = ng.Axis("C", 4), ng.Axis("N", 3)
    x = ng.placeholder([c, n], name="hx")
    w = ng.constant(np.arange(4.0), [c])
    b = ng.constant(np.arange(3.0) + 0.5, [n])
    return [ng.tanh(ng.dot(w, x) + b), ng.variable([n], name="hv", initial=0.25)]


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "g.json"
    save_graph(path, _graph())
    return path


def _error(path) -> str:
    with pytest.raises(GraphFileError) as info:
        load_graph(path)
    return str(info.value)


def _forge_arrays(path, data: bytes) -> None:
    """Put `data` in the arrays file and record its digest, as a forger would."""
    arrays_path(path).write_bytes(data)
    doc = json.loads(path.read_text())
    doc["arrays"]["sha256"] = graphfile._sha256(str(arrays_path(path)))
    path.write_text(json.dumps(doc))


def _edit(path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def _npy(shape, dtype="<f8", data=b"", version=(1, 0)) -> bytes:
    out = io.BytesIO()
    header = {"descr": dtype, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(out, header) if version == (1, 0) else (
        np.lib.format.write_array_header_2_0(out, header)
    )
    return out.getvalue() + data


def _zip(members: dict, compression=zipfile.ZIP_STORED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


# -- item 3: a corrupt archive with a matching digest ---------------------------------------------
def _set_flag(data: bytes, flag: int) -> bytes:
    """Set a general-purpose flag bit in every local and central header of a zip."""
    out = bytearray(data)
    for sig, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = out.find(sig)
        while at >= 0:
            out[at + offset] |= flag
            at = out.find(sig, at + 4)
    return bytes(out)


def _set_method(data: bytes, method: int) -> bytes:
    out = bytearray(data)
    for sig, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = out.find(sig)
        while at >= 0:
            out[at + offset : at + offset + 2] = method.to_bytes(2, "little")
            at = out.find(sig, at + 4)
    return bytes(out)


CORRUPTIONS = {
    "encrypted": lambda d: _set_flag(d, 0x1),
    "unknown-compression": lambda d: _set_method(d, 99),
    "truncated": lambda d: d[: len(d) // 2],
    "empty": lambda d: b"",
    "central-directory-cut": lambda d: d[:-30],
}


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_a_corrupt_archive_with_a_matching_digest_is_a_graph_file_error(saved, corrupt):
    _forge_arrays(saved, corrupt(arrays_path(saved).read_bytes()))
    message = _error(saved)
    assert str(arrays_path(saved)) in message


# -- item 4: the npy header is read and compared before the data ----------------------------------
def _constant_graph(tmp_path, shape):
    """A graph file whose one Constant says it has `shape` (float64), arrays to be forged."""
    path = tmp_path / "c.json"
    save_graph(path, [ng.constant(np.zeros(3), {"K": 3}, np.float64)])
    _edit(path, lambda d: d["nodes"][0]["attrs"]["value"].update(shape=list(shape)))
    return path


def test_a_header_that_disagrees_with_the_graph_is_refused_before_reading_data(tmp_path):
    path = _constant_graph(tmp_path, [3])
    # the member claims 10**9 elements, and is a deflate bomb of 100 MB of zeros
    bomb = _npy((10**9,)) + bytes(100 << 20)
    _forge_arrays(path, _zip({"n0_value.npy": bomb}, zipfile.ZIP_DEFLATED))
    assert "array 'n0_value' is float64 of shape [1000000000] in the .npz, but the graph says "\
           "float64 of shape [3]" in _error(path)  # fmt: skip


def test_a_member_longer_than_its_header_is_refused(tmp_path):
    path = _constant_graph(tmp_path, [3])
    bomb = _npy((3,)) + bytes(50 << 20)  # 50 MB after the 24 bytes the header promises
    _forge_arrays(path, _zip({"n0_value.npy": bomb}, zipfile.ZIP_DEFLATED))
    assert "there are bytes after the array's data" in _error(path)


def test_a_member_shorter_than_its_header_is_refused(tmp_path):
    path = _constant_graph(tmp_path, [3])
    _forge_arrays(path, _zip({"n0_value.npy": _npy((3,), data=bytes(16))}))
    assert "the data ends after 16 of 24 bytes" in _error(path)


def test_a_huge_array_agreed_by_both_files_is_refused_by_the_size_limit(tmp_path):
    path = _constant_graph(tmp_path, [10**12])
    _forge_arrays(path, _zip({"n0_value.npy": _npy((10**12,), data=bytes(8))}))
    message = _error(path)
    assert "array 'n0_value' needs 8000000000000 bytes, more than the limit of" in message


def test_a_version_2_header_is_read(tmp_path):
    path = _constant_graph(tmp_path, [3])
    data = np.arange(3.0).tobytes()
    _forge_arrays(path, _zip({"n0_value.npy": _npy((3,), data=data, version=(2, 0))}))
    (node,) = load_graph(path)
    np.testing.assert_array_equal(node.attrs["value"], np.arange(3.0))


def test_a_fortran_ordered_array_is_read_in_its_order(tmp_path):
    value = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    path = tmp_path / "f.json"
    save_graph(path, [ng.constant(np.zeros((2, 3)), {"P": 2, "Q": 3}, np.float64)])
    out = io.BytesIO()
    np.save(out, value)
    _forge_arrays(path, _zip({"n0_value.npy": out.getvalue()}))
    (node,) = load_graph(path)
    np.testing.assert_array_equal(node.attrs["value"], value)


# -- items 11-14: header types, big integers, dtype names, lone surrogates ------------------------
@pytest.mark.parametrize("version", [True, 1.0], ids=["true", "1.0"])
def test_the_version_must_be_the_integer_1(saved, version):
    _edit(saved, lambda d: d.update(version=version))
    assert _error(saved) == (
        f"{saved}: format version {json.dumps(version)} is not supported (this reads 1)"
    )


@pytest.mark.parametrize("opset", ["20", 20.0, True], ids=["text", "float", "true"])
def test_a_recorded_opset_must_be_an_integer(saved, opset):
    _edit(saved, lambda d: d.update(onnx_opset=opset))
    assert _error(saved) == f"{saved}: expected an integer opset, got {json.dumps(opset)}"


def test_an_integer_of_thousands_of_digits_is_reported(saved):
    text = saved.read_text().replace('"outputs": [', '"outputs": [' + "9" * 5000 + ", ", 1)
    saved.write_text(text)
    assert _error(saved) == f"{saved}: an integer of 5000 digits is too large"


def test_nan_literals_are_not_json(saved):
    text = saved.read_text()
    assert '"length": 4' in text
    saved.write_text(text.replace('"length": 4', '"length": NaN', 1))
    assert "NaN is not JSON" in _error(saved)


@pytest.mark.parametrize("name", ["(f4, 2)", "(10000000000,)f4", "f4", "object", "V8", "<f8"])
def test_only_the_documented_dtype_names_are_accepted(saved, name):
    def change(doc):
        for node in doc["nodes"]:
            if node["op"] == "Placeholder":
                node["attrs"]["dtype"] = name

    _edit(saved, change)
    assert f"attribute 'dtype': expected a dtype, got {json.dumps(name)}" in _error(saved)


def test_the_documented_dtype_names_are_numpy_names():
    assert all(np.dtype(name).name == name for name in arraysfile.DTYPE_NAMES)


def test_a_lone_surrogate_in_an_axis_name_is_refused(saved):
    text = saved.read_text().replace('"name": "C"', '"name": "C\\ud800"', 1)
    saved.write_text(text)
    assert "expected an axis name, got a string with a lone surrogate at 1" in _error(saved)


def test_a_lone_surrogate_is_refused_when_saving_too(tmp_path):
    x = ng.placeholder({"C\udc80": 2}, name="sx")
    with pytest.raises(GraphFileError, match="lone surrogate at 1"):
        save_graph(tmp_path / "g.json", [ng.tanh(x)])
    assert os.listdir(tmp_path) == []


def test_running_out_of_memory_for_an_array_is_a_graph_file_error(saved, monkeypatch):
    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(arraysfile.np, "empty", no_memory)
    assert "array 'n0_value': not enough memory to read it" in _error(saved)


# -- item 15: only regular files, with a size limit ------------------------------------------------
def _load_in_thread(path):
    """load_graph's outcome, or 'hung' if it has not finished within 10 s."""
    box = []

    def target():
        try:
            load_graph(path)
            box.append("loaded")
        except GraphFileError as e:
            box.append(str(e))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(10)
    return box[0] if box else "hung"


@pytest.mark.parametrize("which", ["graph", "arrays"])
def test_a_fifo_is_refused_not_waited_on(saved, which):
    target = saved if which == "graph" else arrays_path(saved)
    target.unlink()
    os.mkfifo(target)
    expected = (
        f"{saved}: cannot read: not a regular file"
        if which == "graph"
        else f"{saved}: cannot read its arrays file {target}: not a regular file"
    )
    assert _load_in_thread(saved) == expected


@pytest.mark.parametrize("which", ["graph", "arrays"])
def test_a_link_to_a_device_is_refused(saved, which):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero on this system")
    target = saved if which == "graph" else arrays_path(saved)
    target.unlink()
    target.symlink_to("/dev/zero")
    assert _load_in_thread(saved).endswith("not a regular file")


def test_a_graph_file_over_the_size_limit_is_refused(saved, monkeypatch):
    monkeypatch.setattr(graphfile, "MAX_GRAPH_BYTES", 100)
    size = saved.stat().st_size
    assert _error(saved) == f"{saved}: cannot read: {size} bytes, more than the limit of 100"


def test_a_symlink_to_a_regular_file_is_read(saved, tmp_path):
    (tmp_path / "link.json").symlink_to(saved)
    (tmp_path / "link.npz").symlink_to(arrays_path(saved))
    assert ng.format_graph(load_graph(tmp_path / "link.json")) == ng.format_graph(_graph())


# -- item 16: array lookups do not scan a list ----------------------------------------------------
def test_many_arrays_load_and_are_found_by_key(tmp_path, monkeypatch):
    k = ng.Axis("K", 1)
    consts = [ng.constant(np.array([float(i)]), [k], np.float64) for i in range(3000)]
    path = tmp_path / "many.json"
    save_graph(path, consts)
    lookups = []
    real = arraysfile.ArraysFile.read

    def counting(self, key, dtype, shape):
        lookups.append(type(self.members))
        return real(self, key, dtype, shape)

    monkeypatch.setattr(arraysfile.ArraysFile, "read", counting)
    loaded = load_graph(path)
    assert [float(n.attrs["value"][0]) for n in loaded] == list(range(3000))
    assert set(lookups) == {dict}


# -- fuzz: any mutation gives a loaded graph or a GraphFileError ----------------------------------
_JUNK = [None, True, 0, -1, 2**70, 1.5, float("inf"), "", "x", "nan", [], {}, [0], {"a": 1},
         "float64", {"name": "C", "length": 4}, [{"name": "C", "length": -1}],
         "C\ud800"]  # fmt: skip


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _mutate(doc, rng: random.Random):
    doc = copy.deepcopy(doc)
    *parent_path, last = rng.choice([p for p in _paths(doc) if p])
    parent = doc
    for k in parent_path:
        parent = parent[k]
    action = rng.randrange(3)
    if action == 0:
        parent[last] = rng.choice(_JUNK)
    elif action == 1:
        del parent[last]
    elif isinstance(parent, dict):
        parent[rng.choice(["zz", "id", "op", "args", "attrs", "shape"])] = rng.choice(_JUNK)
    else:
        parent.insert(last, copy.deepcopy(rng.choice(parent)))
    return doc


def _loads_or_reports(path) -> bool:
    """True if it loaded; False for a GraphFileError; any other exception fails the test."""
    try:
        load_graph(path)
    except GraphFileError as e:
        assert str(path) in str(e) or str(arrays_path(path)) in str(e)
        return False
    return True


def test_fuzz_mutated_json_gives_only_graph_file_errors(saved):
    original = json.loads(saved.read_text())
    rng = random.Random(11)
    outcomes = []
    for case in range(250):
        doc = original
        for _ in range(rng.randint(1, 3)):
            doc = _mutate(doc, rng)
        text = json.dumps(doc)
        if case % 5 == 0:  # also damage the text itself
            cut = rng.randrange(len(text))
            text = text[:cut] + rng.choice(["", "}", "\\u", '"', "9" * 50]) + text[cut + 1 :]
        saved.write_text(text, encoding="utf-8", errors="surrogatepass")
        outcomes.append(_loads_or_reports(saved))
    assert outcomes.count(False) > 150  # the mutations do reach the checks


def test_fuzz_bit_flipped_and_truncated_arrays_give_only_graph_file_errors(saved):
    original = arrays_path(saved).read_bytes()
    rng = random.Random(3)
    outcomes = []
    for case in range(300):
        data = bytearray(original)
        if case % 4 == 0:
            data = data[: rng.randrange(len(data))]
        else:
            for _ in range(rng.randint(1, 3)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        _forge_arrays(saved, bytes(data))
        outcomes.append(_loads_or_reports(saved))
    assert outcomes.count(False) > 100


# -- item 7: two writers, and a reader, in any interleaving ----------------------------------------
def _pause_after_first_replace(monkeypatch, writer: str, paused: threading.Event,
                               resume: threading.Event):  # fmt: skip
    """Make thread `writer` stop between moving its arrays file and its graph file."""
    real = os.replace

    def replace(src, dst):
        real(src, dst)
        if threading.current_thread().name == writer and str(dst).endswith(".npz"):
            paused.set()
            resume.wait(3)

    monkeypatch.setattr(os, "replace", replace)


def _in_thread(name, fn, *args):
    thread = threading.Thread(target=fn, args=args, name=name, daemon=True)
    thread.start()
    return thread


def test_two_writers_leave_one_writers_pair(tmp_path, monkeypatch):
    path = tmp_path / "g.json"
    first = [ng.constant(np.full(3, 1.0), {"K": 3}, np.float64)]
    second = [ng.constant(np.full(5, 2.0), {"K": 5}, np.float64)]
    paused, resume = threading.Event(), threading.Event()
    _pause_after_first_replace(monkeypatch, "first", paused, resume)
    a = _in_thread("first", save_graph, path, first)
    assert paused.wait(10)
    b = _in_thread("second", save_graph, path, second)
    b.join(1.0)  # without the lock, the second writer moves both its files now
    resume.set()
    a.join(10)
    b.join(10)
    assert load_graph(path) == second  # the second writer waited and went last


def test_a_reader_never_sees_half_a_save(tmp_path, monkeypatch):
    path = tmp_path / "g.json"
    save_graph(path, [ng.constant(np.full(3, 1.0), {"K": 3}, np.float64)])
    new = [ng.constant(np.full(5, 2.0), {"K": 5}, np.float64)]
    paused, resume = threading.Event(), threading.Event()
    _pause_after_first_replace(monkeypatch, "writer", paused, resume)
    writer = _in_thread("writer", save_graph, path, new)
    assert paused.wait(10)
    box = []
    reader = _in_thread("reader", lambda: box.append(load_graph(path)))
    reader.join(1.0)  # without the shared lock it reads the new arrays with the old JSON now
    resume.set()
    writer.join(10)
    reader.join(10)
    assert box == [new]


def test_two_processes_saving_in_a_loop_leave_a_readable_pair(tmp_path):
    import subprocess
    import sys

    script = (
        "import sys, numpy as np, ngrules as ng\n"
        "k = int(sys.argv[1])\n"
        "node = ng.constant(np.full(k, float(k)), {'K': k}, np.float64)\n"
        "for _ in range(15):\n"
        "    ng.save_graph(sys.argv[2], [node])\n"
    )
    out = tmp_path / "g.json"
    procs = [subprocess.Popen([sys.executable, "-c", script, str(k), str(out)]) for k in (3, 5)]
    assert [p.wait(120) for p in procs] == [0, 0]
    (node,) = load_graph(out)
    assert node.attrs["value"].shape in {(3,), (5,)}
    assert sorted(os.listdir(tmp_path)) == ["g.json", "g.npz"]


# -- temporaries, error messages, modes -----------------------------------------------------------
def test_stale_temporaries_of_the_same_output_are_removed(saved, tmp_path):
    stale = tmp_path / ".g.json.abc12345.tmp"
    stale.write_bytes(b"x" * 1000)
    other = tmp_path / ".h.json.abc12345.tmp"
    other.write_bytes(b"y")
    save_graph(saved, _graph())
    assert not stale.exists() and other.exists()


def test_a_live_writers_temporary_is_not_removed(saved, tmp_path):
    with fileio.staged_files() as stage:
        name = stage(tmp_path / "g.json", lambda f: f.write(b"{}"))
        save_graph(tmp_path / "g.json", _graph())  # a second writer of the same output
        assert os.path.exists(name)
    assert (tmp_path / "g.json").read_bytes() == b"{}"


def test_a_write_error_names_the_users_path(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full)
    with pytest.raises(OSError) as info:
        save_graph(tmp_path / "g.json", _graph())
    assert info.value.filename == str(tmp_path / "g.npz")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("mode", [0o600, 0o755, 0o640])
def test_replacing_a_graph_keeps_its_files_modes(saved, mode):
    for p in (saved, arrays_path(saved)):
        p.chmod(mode)
    save_graph(saved, _graph())
    assert {stat.S_IMODE(p.stat().st_mode) for p in (saved, arrays_path(saved))} == {mode}


def test_saving_through_a_symlink_replaces_its_target(saved, tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(saved)
    new = [ng.constant(np.ones(2), {"K": 2}, np.float64)]
    save_graph(link, new)
    assert link.is_symlink() and Path(os.readlink(link)) == saved
    assert json.loads(saved.read_text())["outputs"] == [0]  # the JSON went to the target
    assert load_graph(link) == new


@pytest.mark.parametrize("bad", ["", "/"])
def test_an_output_that_is_empty_or_a_folder_is_a_file_error(bad):
    with pytest.raises(ng.NgrulesError):
        save_graph(bad, _graph())
