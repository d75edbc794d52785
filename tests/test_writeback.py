"""A file's writeback started as it is written (`ir.writeback`, issue 34 item 6): the ranges
given to the kernel follow one another from where the writing began, each at least
STEP_BYTES, never past what was written; a file object without a descriptor is left alone;
the file's bytes are what was written."""

import io

import numpy as np
import pytest

from ngrules.interop.onnx import weights
from ngrules.ir import writeback


@pytest.fixture
def started(monkeypatch):
    """The (fd, offset, length, flags) of every writeback started, none really."""
    calls = []
    monkeypatch.setattr(writeback, "_sync_file_range", lambda: lambda *a: calls.append(a))
    monkeypatch.setattr(writeback, "STEP_BYTES", 100)
    return calls


def test_ranges_follow_one_another_from_where_the_writing_began(tmp_path, started):
    with open(tmp_path / "f.bin", "wb") as f:
        f.write(b"h" * 7)  # written before: not the follower's
        follow = writeback.Writeback(f)
        for size in (30, 80, 5, 250, 99, 1):
            f.write(b"x" * size)
            follow.advanced()
            assert all(offset + length <= f.tell() for _, offset, length, _ in started)
    offsets = [(offset, length) for _, offset, length, _ in started]
    assert offsets == [(7, 110), (117, 255), (372, 100)]
    assert all(fd == follow.fd and flags == 2 for fd, _, _, flags in started)
    assert (tmp_path / "f.bin").read_bytes() == b"h" * 7 + b"x" * 465


def test_a_file_without_a_descriptor_is_left_alone(started):
    out = io.BytesIO()
    follow = writeback.Writeback(out)
    out.write(b"x" * 1000)
    follow.advanced()
    assert started == [] and follow.fd is None


def test_a_model_written_with_writeback_reads_back_the_same(tmp_path, started, monkeypatch):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    array = np.arange(5000, dtype=np.float32).reshape(50, 100)
    light = helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])], "g", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [50, 100])]),
        opset_imports=[helper.make_opsetid("", 17)])
    monkeypatch.setattr(weights, "WRITE_BYTES", 1000)
    with open(tmp_path / "w.onnx", "wb") as f:
        weights.write(f, light, {"w": array})
    (tensor,) = onnx.load(str(tmp_path / "w.onnx")).graph.initializer
    np.testing.assert_array_equal(numpy_helper.to_array(tensor), array)
    size = (tmp_path / "w.onnx").stat().st_size
    assert len(started) == 20 and sum(length for _, _, length, _ in started) <= size
