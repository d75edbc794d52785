"""A large model file is mapped rather than read (`ir.filebytes.map_file`, issue 34 item 6):
folding in place writes this process's copies of its pages, never the file; the output is
the one written from the file read; a file changed or cut shorter while it is read is an
ngrules error, raised before its missing bytes would be read (a bus error)."""

import hashlib
import os

import numpy as np
import pytest

from ngrules.ir import filebytes

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ngrules.cli.main import main  # noqa: E402
from ngrules.engine import driver  # noqa: E402
from ngrules.interop.onnx import OnnxError  # noqa: E402
from ngrules.interop.onnx.exporter import export_parts  # noqa: E402
from ngrules.interop.onnx.importer import import_model  # noqa: E402
from ngrules.interop.onnx.importing import loading  # noqa: E402


def conv_batchnorm(path, seed) -> int:
    """Conv, BatchNormalization, Conv: the first Conv's weight (4,608 elements) is folded
    over, the second's (9,216) is written as read. Returns the second's bytes."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((32, 32, 3, 3)).astype(np.float32)
    scale, bias, mean = rng.standard_normal((3, 32)).astype(np.float32)
    var = rng.uniform(0.5, 2.0, 32).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w, "w"), (scale, "s"), (bias, "b"), (mean, "m"), (var, "v"), (w2, "w2")]]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
         helper.make_node("Conv", ["n", "w2"], ["y"], pads=[1, 1, 1, 1])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 6, 6])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return w2.nbytes


def digest(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_apply_folding_into_a_mapped_file_writes_the_same_model_and_not_the_file(
        tmp_path, monkeypatch):
    """The weight written as read is copied from the file by the kernel; the one folded over
    is written from this process's copy of its pages (the file's bytes are the old ones)."""
    path = str(tmp_path / "m.onnx")
    unchanged = conv_batchnorm(path, 5)
    before = digest(path)
    given, rewrite, copied, copy = [], driver.rewrite, [], os.copy_file_range

    def spy(*args, **kwargs):
        given.append(kwargs.get("spend"))
        return rewrite(*args, **kwargs)

    def copy_spy(src, dst, count, offset_src=None, *rest):
        copied.append(count)
        return copy(src, dst, count, offset_src, *rest)

    monkeypatch.setattr(driver, "rewrite", spy)
    monkeypatch.setattr(os, "copy_file_range", copy_spy)
    outputs = []
    for map_bytes in (0, 1 << 62):  # mapped, then read (the folded weight's node is new)
        monkeypatch.setattr(loading, "MAP_BYTES", map_bytes)
        outputs.append(str(tmp_path / f"out{len(outputs)}.onnx"))
        assert main(["apply", path, "--pipeline", "inference", "-o", outputs[-1], "-q"]) == 0
        assert copied == [unchanged]  # the second weight, by the first run
        monkeypatch.delattr(os, "copy_file_range", raising=False)  # the read run: memory
    mapped, read = given
    assert getattr(read, "source", None) is None
    assert getattr(mapped, "source", None) is not None  # the file mapped, its bytes spent
    assert len(mapped.written) == 1  # the folded weight
    assert digest(outputs[0]) == digest(outputs[1])  # byte for byte
    assert digest(path) == before  # the weight folded over is this process's copy only
    with open(path, "rb") as f:
        assert mapped[:] != f.read()  # which was written: the fold was in place


def test_a_file_shorter_than_its_size_is_not_mapped(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 10000)
    with open(path, "rb") as f:
        assert filebytes.map_file(f, 20000) is None  # it shrank since its size was taken
        data = filebytes.map_file(f, 10000, "f.bin")
    assert data[:] == b"x" * 10000 and filebytes.changed(data) is None
    assert filebytes.changed(b"bytes read") is None
    with open(path, "rb") as f:
        assert filebytes.changed(filebytes.read_into(f, 10000)) is None


@pytest.mark.parametrize("change", ["grown", "cut", "rewritten"])
def test_a_mapped_file_changed_before_it_is_written_is_an_error(tmp_path, monkeypatch, change):
    """Checked before the weights are read for the written file (a file cut shorter would
    otherwise be a bus error) and after (some weights of each version)."""
    monkeypatch.setattr(loading, "MAP_BYTES", 0)
    path = str(tmp_path / "m.onnx")
    conv_batchnorm(path, 6 + len(change))  # a weight of its own (hash-consing shares equal ones)
    imported = import_model(path)
    model, arrays = export_parts(imported.outputs)
    assert arrays and all(filebytes.root(a) is imported.spendable for a in arrays.values())
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        if change == "grown":
            f.seek(0, os.SEEK_END)
            f.write(b"\0" * 16)
        elif change == "cut":
            f.truncate(size // 2)
        else:  # the same size, other bytes: told by its time of change
            f.seek(size - 8)
            f.write(b"\1" * 8)
    if change == "rewritten":
        info = os.stat(path)
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 10**9))
    from ngrules.interop.onnx import weights

    with open(tmp_path / "out.onnx", "wb") as out, \
            pytest.raises(OnnxError, match="m.onnx: the model file changed while it was read"):
        weights.write(out, model, arrays, check=lambda m, a: None)
    assert os.path.getsize(tmp_path / "out.onnx") == 0  # nothing of it read or written


@pytest.mark.parametrize("copies", [0, 1000])  # bytes copied before the kernel refuses
def test_a_weight_the_kernel_cannot_copy_is_written_from_memory(tmp_path, monkeypatch, copies):
    """Another file system (EXDEV), an old kernel (ENOSYS): the same bytes, from memory."""
    import errno

    path = str(tmp_path / "m.onnx")
    conv_batchnorm(path, 20 + copies)
    copy, calls = os.copy_file_range, []

    def refuse(src, dst, count, offset_src=None, *rest):
        calls.append(count)
        if len(calls) == 1 and copies:
            return copy(src, dst, copies, offset_src, *rest)
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(loading, "MAP_BYTES", 0)
    monkeypatch.setattr(os, "copy_file_range", refuse)
    out = str(tmp_path / "mapped.onnx")
    assert main(["apply", path, "--no-rules", "-o", out, "-q"]) == 0
    assert len(calls) == (3 if copies else 2)  # every large weight tried (w, w2)
    monkeypatch.delattr(os, "copy_file_range")
    expected = str(tmp_path / "memory.onnx")  # (the same nodes, hash-consed: from memory)
    assert main(["apply", path, "--no-rules", "-o", expected, "-q"]) == 0
    assert digest(out) == digest(expected)


def test_a_mapped_weight_is_written_into_a_file_object_of_memory(tmp_path, monkeypatch):
    """io.BytesIO has no descriptor (`fileno` raises): the weights are written from memory."""
    import io

    from ngrules.interop.onnx import weights

    monkeypatch.setattr(loading, "MAP_BYTES", 0)
    path = str(tmp_path / "m.onnx")
    conv_batchnorm(path, 40)
    imported = import_model(path)
    model, arrays = export_parts(imported.outputs)
    assert all(filebytes.file_span(a) is not None for a in arrays.values())
    buffer = io.BytesIO()
    weights.write(buffer, model, arrays)
    read = onnx.load_from_string(buffer.getvalue())
    got = {t.name: numpy_helper.to_array(t) for t in read.graph.initializer}
    for name, array in arrays.items():
        np.testing.assert_array_equal(got[name], array)
