"""The ONNX file I/O that runs beside other work (issue 34, item 6): the model file is read on a
thread while onnx is imported, and the written file is written on a thread while
the exporter's check runs. What the threads raise reaches the caller; a model the check
refuses leaves no file, temporary or final; the file written is the model the check saw."""

import contextlib
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ngrules.cli.graphio import save  # noqa: E402
from ngrules.interop.onnx import OnnxError, weights  # noqa: E402
from ngrules.interop.onnx.exporter import export_parts  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402
from ngrules.interop.onnx.importing import loading  # noqa: E402

BIG = weights.STEERING_SIZE + 1


def _dense(path):
    """x[2, rows] -> Gemm with a weight large enough to be kept apart, saved at `path`."""
    rows = BIG // 8 + 1
    w = np.random.default_rng(0).standard_normal((8, rows)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)], "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return w


def test_background_returns_the_value_or_raises_the_error_on_the_callers_thread():
    assert weights.Background(lambda: 41 + 1).result() == 42

    def fail():
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        weights.Background(fail).result()


def test_a_ctrl_c_while_waiting_is_raised_once_the_thread_has_stopped():
    """The caller closes the file the thread uses once the wait ends: never under it."""
    import signal
    import threading
    import time

    done = threading.Event()

    def work():
        time.sleep(0.3)
        done.set()

    threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        weights.Background(work).wait()
    assert done.is_set()


def test_the_file_read_beside_onnxs_import_is_the_files_bytes(tmp_path):
    w = _dense(tmp_path / "m.onnx")
    model, arrays = loading.read_model(tmp_path / "m.onnx")
    np.testing.assert_array_equal(arrays["w"], w)
    assert [i.name for i in model.graph.input] == ["x", "w"]


def test_a_read_that_fails_on_its_thread_is_the_callers_error(tmp_path, monkeypatch):
    _dense(tmp_path / "m.onnx")
    real = weights.Background

    def read_fails():
        raise OSError(5, "Input/output error")

    def failing(run):  # the read of the file, on its thread, fails as a bad disk's would
        return real(read_fails)

    monkeypatch.setattr(weights, "Background", failing)
    with pytest.raises(OSError, match="Input/output error"):
        loading.read_model(tmp_path / "m.onnx")


def test_a_model_the_check_refuses_is_written_nowhere(tmp_path, monkeypatch):
    """The check fails while the file is being written: the error is raised once the writing
    has stopped, and the folder holds no output and no temporary."""
    from ngrules.interop.onnx.exporting.passes import refused

    _dense(tmp_path / "m.onnx")
    imported = import_model(str(tmp_path / "m.onnx"))

    def refuse(model, arrays, source=None):
        raise OnnxError("refused for the test")

    monkeypatch.setattr(refused, "check", refuse)
    with pytest.raises(OnnxError, match="refused for the test"):
        save(str(tmp_path / "out.onnx"), imported.outputs, imported.output_names)
    assert sorted(os.listdir(tmp_path)) == ["m.onnx"]


def test_the_refusal_is_the_error_reported_when_the_writing_fails_too(tmp_path):
    model = helper.make_model(helper.make_graph([], "g", [], []))

    class Full:
        def write(self, data):
            raise OSError(28, "No space left on device")

    def refuse(model, arrays, source=None):
        raise OnnxError("refused for the test")

    with pytest.raises(OnnxError, match="refused for the test"):
        weights.write(Full(), model, {"w": np.zeros(BIG, np.float32)}, check=refuse)
    with pytest.raises(OSError, match="No space left"):
        weights.write(Full(), model, {"w": np.zeros(BIG, np.float32)}, check=lambda m, a: None)


def test_the_file_written_while_checked_is_the_model_the_check_saw(tmp_path):
    """Serialised before the check (which names unnamed nodes for a moment): node for node
    the checked model, with the weight's bytes."""
    w = _dense(tmp_path / "m.onnx")
    imported = import_model(str(tmp_path / "m.onnx"))
    save(str(tmp_path / "out.onnx"), imported.outputs, imported.output_names)
    model, arrays = export_parts(imported.outputs, output_names=imported.output_names)
    written = onnx.load(str(tmp_path / "out.onnx"))
    for node in [*model.graph.node, *written.graph.node]:  # "" present or absent: no name
        if not node.name:
            node.ClearField("name")
    (name,) = arrays
    inits = {t.name: numpy_helper.to_array(t) for t in written.graph.initializer}
    np.testing.assert_array_equal(inits[name], w)
    assert written.graph.node == model.graph.node
    assert [i.name for i in written.graph.input] == [i.name for i in model.graph.input]


def _fsyncs(monkeypatch) -> list[int]:
    """The descriptors os.fsync is called with from now on (the real call still made)."""
    called, real = [], os.fsync

    def counting(fd):
        called.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return called


def test_apply_syncs_its_output_once_before_putting_it_in_place(tmp_path, monkeypatch):
    """The written file reaches the disk before it replaces the old one (a power cut then
    finds one whole model or the other), synced once: by the staged file, not also by the
    thread that wrote it."""
    from ngrules.cli import main
    from ngrules.ir import fileio

    _dense(tmp_path / "m.onnx")
    out = tmp_path / "out.onnx"
    out.write_bytes(b"old")
    called = _fsyncs(monkeypatch)
    replaced_after = []
    real_replace = os.replace

    def replace(src, dst):
        replaced_after.append(len(called))
        real_replace(src, dst)

    monkeypatch.setattr(fileio.os, "replace", replace)
    assert main(["apply", str(tmp_path / "m.onnx"), "--no-rules", "-o", str(out)]) == 0
    assert len(called) == 1 and replaced_after == [1]
    assert onnx.load(str(out)).graph.node[0].op_type == "Gemm"


def _counting_reads(monkeypatch) -> list:
    """Every whole-file read (`read_into`) the loading module makes, noted."""
    reads = []
    real = loading.read_into

    def counted(f, size):
        reads.append(size)
        return real(f, size)

    monkeypatch.setattr(loading, "read_into", counted)
    return reads


@pytest.mark.parametrize("ahead", [False, True])
def test_a_ctrl_c_while_the_model_is_read_is_what_is_raised(tmp_path, monkeypatch, ahead):
    """A Ctrl-C while onnx and the converters load beside the read is raised once the read
    has stopped, not replaced by an error the read met meanwhile."""
    _dense(tmp_path / "m.onnx")

    def failing(*args):
        raise OSError(5, "Input/output error")

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(loading, "_bytes_of", failing)
    monkeypatch.setattr(loading, "read_into", failing)  # the read ahead's
    with loading.read_ahead(tmp_path / "m.onnx") if ahead else contextlib.nullcontext():
        assert bool(loading._AHEAD) == ahead
        with pytest.raises(KeyboardInterrupt):
            loading.read_model(tmp_path / "m.onnx", meanwhile=interrupted)
    with pytest.raises(OSError, match="Input/output"):  # the read's error, when nothing else
        loading.read_model(tmp_path / "m.onnx")


def test_a_model_read_ahead_is_read_once_and_its_bytes_are_the_files(tmp_path, monkeypatch):
    """`apply` reads the model on a thread while its rules load: `read_model` then takes
    those bytes rather than reading the file again."""
    w = _dense(tmp_path / "m.onnx")
    reads = _counting_reads(monkeypatch)
    with loading.read_ahead(tmp_path / "m.onnx"):
        model, arrays = loading.read_model(tmp_path / "m.onnx")
    np.testing.assert_array_equal(arrays["w"], w)
    assert len(reads) == 1 and not loading._AHEAD


def test_a_model_replaced_after_its_read_ahead_began_is_read_again(tmp_path, monkeypatch):
    """The bytes read ahead are of the file as it was: a file replaced (or changed) since is
    read again, and the new weights are the ones imported."""
    _dense(tmp_path / "m.onnx")
    reads = _counting_reads(monkeypatch)
    with loading.read_ahead(tmp_path / "m.onnx"):
        os.replace(tmp_path / "m.onnx", tmp_path / "old.onnx")
        _dense(tmp_path / "m.onnx")
        model = onnx.load(str(tmp_path / "m.onnx"))
        model.graph.initializer[0].raw_data = np.full(BIG // 8 * 8 + 8, 2, np.float32).tobytes()
        onnx.save(model, str(tmp_path / "m.onnx"))
        _, arrays = loading.read_model(tmp_path / "m.onnx")
    assert np.all(arrays["w"] == 2)
    assert len(reads) == 2 and not loading._AHEAD


def test_a_model_over_the_imports_budget_is_not_read_ahead(tmp_path, monkeypatch):
    """A file the import's memory budget refuses is never read (its import says why); one
    read ahead that no one takes is dropped on leaving."""
    _dense(tmp_path / "m.onnx")
    reads = _counting_reads(monkeypatch)
    size = os.path.getsize(tmp_path / "m.onnx")
    with loading.read_ahead(tmp_path / "m.onnx", memory_bytes=size - 1):
        assert not loading._AHEAD
    assert not reads
    with loading.read_ahead(tmp_path / "m.onnx"):
        assert loading._AHEAD
    assert not loading._AHEAD


def test_apply_reads_the_model_once_beside_its_rules(tmp_path, monkeypatch):
    """`ngrules apply` begins the read before its rules load and imports those bytes."""
    from ngrules.cli.main import main

    w = _dense(tmp_path / "m.onnx")
    reads, begun = _counting_reads(monkeypatch), []
    real = loading._start
    monkeypatch.setattr(loading, "_start", lambda *a: begun.append(real(*a)) or begun[-1])
    assert main(["apply", str(tmp_path / "m.onnx"), "--pipeline", "inference",
                 "-o", str(tmp_path / "out.onnx"), "-q"]) == 0
    assert len(begun) == 1 and begun[0] is not None  # the read ahead: the one read
    assert len(reads) == 1 and not loading._AHEAD
    written = onnx.load(str(tmp_path / "out.onnx"))
    inits = {t.name: numpy_helper.to_array(t) for t in written.graph.initializer}
    assert any(v.shape == w.shape and np.array_equal(v, w) for v in inits.values())
