"""Large model files are written past the page cache (`ir.directwrite`, issue 34 item 6): the
bytes written are those given, whatever the sizes of the writes, the file's position or the
file system's answer to `O_DIRECT`, and the descriptor is left without `O_DIRECT`."""

import errno
import fcntl
import os

import numpy as np
import pytest

from ngrules.ir import directwrite

ALIGN = directwrite.ALIGN


def _pieces():
    rng = np.random.default_rng(0)
    sizes = [1, ALIGN - 1, 3 * ALIGN, 5, 2 * ALIGN + 7, 0, 4 * ALIGN, 11]
    return [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]


def _direct_flag(fd) -> bool:
    return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & getattr(os, "O_DIRECT", 0))


@pytest.mark.parametrize("before", [b"", b"abc"])  # b"abc": an unaligned position
def test_the_bytes_written_are_the_bytes_given(tmp_path, monkeypatch, before):
    monkeypatch.setattr(directwrite, "BUFFER_BYTES", 2 * ALIGN)  # many fills of the buffer
    pieces = _pieces()
    path = tmp_path / "out.bin"
    with open(path, "wb") as f:
        f.write(before)
        with directwrite.writing(f) as out:
            assert out.direct is (not before and out.direct)  # never at an unaligned position
            for piece in pieces:
                out.write(piece if len(piece) % 2 else piece.tobytes())
        assert not _direct_flag(f.fileno())
    assert path.read_bytes() == before + b"".join(p.tobytes() for p in pieces)


def test_a_file_system_refusing_o_direct_gets_the_same_bytes(tmp_path, monkeypatch):
    """Refused when turned on, or refused at the first write (EINVAL): written as usual."""
    monkeypatch.setattr(directwrite, "BUFFER_BYTES", 2 * ALIGN)
    pieces = _pieces()
    expected = b"".join(p.tobytes() for p in pieces)

    def refuse(fd, on):
        raise OSError(errno.EINVAL, "Invalid argument")

    with monkeypatch.context() as m:
        m.setattr(directwrite, "_set", refuse)
        with open(tmp_path / "a.bin", "wb") as f, directwrite.writing(f) as out:
            assert not out.direct
            for piece in pieces:
                out.write(piece)
    assert (tmp_path / "a.bin").read_bytes() == expected

    write, calls, state = os.write, [], {"on": False}  # O_DIRECT as this file system sees it

    def refuse_direct(fd, data):
        calls.append(state["on"])
        if state["on"]:
            raise OSError(errno.EINVAL, "Invalid argument")
        return write(fd, data)

    monkeypatch.setattr(directwrite, "_DIRECT", 1 << 14)
    monkeypatch.setattr(directwrite, "_set", lambda fd, on: state.update(on=on))
    with open(tmp_path / "b.bin", "wb") as f:
        with directwrite.writing(f) as out:
            assert out.direct
            monkeypatch.setattr(os, "write", refuse_direct)
            for piece in pieces:
                out.write(piece)
        monkeypatch.setattr(os, "write", write)
    assert (tmp_path / "b.bin").read_bytes() == expected
    assert calls[0] and not any(calls[1:]) and not state["on"]


def test_an_error_while_writing_turns_o_direct_off_and_is_raised(tmp_path):
    with open(tmp_path / "c.bin", "wb") as f:
        with pytest.raises(KeyError), directwrite.writing(f) as out:
            out.write(b"x" * (3 * ALIGN))
            raise KeyError("stop")
        assert not _direct_flag(f.fileno())


def test_a_model_written_past_the_cache_is_the_model_written_through_it(tmp_path, monkeypatch):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from ngrules.interop.onnx import weights

    monkeypatch.setattr(directwrite, "BUFFER_BYTES", 4 * ALIGN)
    w = np.random.default_rng(1).standard_normal((64, 300)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 300])])
    model = helper.make_model(graph)
    files = []
    for threshold in (1 << 40, 0):  # through the cache, then past it
        monkeypatch.setattr(weights, "DIRECT_BYTES", threshold)
        files.append(tmp_path / f"m{threshold}.onnx")
        with open(files[-1], "wb") as f:
            weights.write(f, model, {"w": w.T}, check=lambda m, a: None)  # a transposed view
    assert files[0].read_bytes() == files[1].read_bytes()
    read = onnx.load(str(files[1]))
    np.testing.assert_array_equal(numpy_helper.to_array(read.graph.initializer[0]), w.T)
