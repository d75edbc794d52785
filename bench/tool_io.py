"""How a model file's bytes reach the output file on this machine (issue 34, item 6): a file's
bytes written into a new file three ways, each then synced, and the new file read back once
through a small buffer (what its next reader pays); and the file read into fresh memory; in
turns, `--rounds` times; wall and system seconds.

- `write`: from a private mapping of the file (as `ngrules apply` writes a weight from memory);
- `copy`: `copy_file_range`, file to file in the kernel (as it writes an unchanged weight of a
  mapped file: `weights._copy_from_file`);
- `direct`: `O_DIRECT` through a 2 MiB aligned buffer (past the page cache; not used: the
  output is then not in the page cache for its next reader, the `reread` column);
- `read`: the file read into fresh anonymous memory (as a file under 256 MiB is read).

Run: `python bench/tool_io.py [--model PATH] [--rounds 4]` (default: `tool_speed.py`'s
VGG-19, 548 MiB).
"""

from __future__ import annotations

import argparse
import mmap
import os
import resource
import tempfile
import time
from pathlib import Path

CHUNK = 1 << 21


def _timed(work) -> tuple[float, float]:
    start, sys0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_stime
    work()
    return time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_stime - sys0


def _read(path, size: int) -> None:
    with open(path, "rb", buffering=0) as f:
        f.readinto(mmap.mmap(-1, size))


def _read_back(path) -> None:
    """The file read through one small buffer: the page cache's cost, not fresh memory's."""
    buffer = bytearray(CHUNK)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buffer):
            pass


def ways(src: int, size: int, view: memoryview, out: str, model: Path) -> dict:
    def write():
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        for at in range(0, size, CHUNK):
            os.write(fd, view[at:at + CHUNK])
        os.fsync(fd)
        os.close(fd)

    def copy():
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        done = 0
        while done < size:
            done += os.copy_file_range(src, fd, size - done, done)
        os.fsync(fd)
        os.close(fd)

    def direct():
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT)
        buffer = mmap.mmap(-1, CHUNK)
        whole = size // CHUNK * CHUNK
        for at in range(0, whole, CHUNK):
            buffer[:] = view[at:at + CHUNK]
            os.write(fd, buffer)
        os.close(fd)
        fd = os.open(out, os.O_WRONLY | os.O_APPEND)
        os.write(fd, view[whole:])
        os.fsync(fd)
        os.close(fd)

    return {"write": write, "copy": copy, "direct": direct, "read": lambda: _read(model, size)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    default = Path(tempfile.gettempdir()) / "ngrules-bench-models" / "classic_vgg19_op9.onnx"
    parser.add_argument("--model", type=Path, default=default)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    src = os.open(args.model, os.O_RDONLY)
    size = os.fstat(src).st_size
    view = memoryview(mmap.mmap(src, size, flags=mmap.MAP_PRIVATE))
    folder = tempfile.mkdtemp(dir=args.model.parent)
    out = os.path.join(folder, "io.out")
    print(f"{args.model.name}: {size / 2**20:.0f} MiB, load {os.getloadavg()[0]:.1f}")
    for _ in range(args.rounds):
        for name, work in ways(src, size, view, out, args.model).items():
            wall, sys_s = _timed(work)
            line = f"  {name:7s} wall {wall:.3f} sys {sys_s:.3f}"
            if name != "read":
                wall, sys_s = _timed(lambda: _read_back(out))
                line += f"   reread wall {wall:.3f} sys {sys_s:.3f}"
                os.unlink(out)
            print(line, flush=True)
    os.rmdir(folder)


if __name__ == "__main__":
    main()
