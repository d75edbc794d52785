"""What a command imports at its start (issue 34, item 6: `ngrules apply` on an ONNX model in
under a second): the modules it does not use stay unimported. A regression here is silent (the
command still works, only slower), so the module list of a fresh process is checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ngrules.startup import GC_THRESHOLD

pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parent.parent

#: The `ngrules` program in a fresh process, printing the modules it imported as it ends.
RUN = """
import atexit, json, sys
from ngrules.cli import command_line
atexit.register(lambda: print(json.dumps(sorted(sys.modules))))
command_line()
"""


#: Modules an apply on an ONNX model never uses: the other commands' (their parsers are not
#: built), graph files, explanations, stateful execution, the pictures (and the subprocess
#: they run Graphviz in), a TOML parser for a pyproject.toml that does not name ngrules,
#: the close-match finder of error messages (`did you mean`).
UNUSED_BY_APPLY = {
    "ngrules.cli.verify", "ngrules.cli.demo", "ngrules.cli.coverage", "ngrules.cli.fmt",
    "ngrules.cli.picture", "ngrules.engine.explain", "ngrules.ir.graphfile",
    "ngrules.ir.arraysfile", "ngrules.ir.graphset", "ngrules.ir.stateful", "ngrules.ir.userops",
    "tomllib", "tomli", "difflib",
}


def _fresh(folder: Path, *argv: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", RUN, *argv], cwd=folder, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def _model(folder: Path) -> None:
    import ngrules as ng

    x = ng.placeholder([ng.make_axis(2, "B"), ng.make_axis(3, "F")])
    model = ng.to_onnx([ng.maximum(x * 1.0, 0.0) * 2.0 + 1.0])
    (folder / "m.onnx").write_bytes(model.SerializeToString())
    # the nearest pyproject.toml: a project's that has no [tool.ngrules]
    (folder / "pyproject.toml").write_text('[project]\nname = "x"\n')


def test_apply_on_an_onnx_model_imports_only_what_it_uses(tmp_path):
    _model(tmp_path)
    modules = _fresh(tmp_path, "apply", "m.onnx", "--pipeline", "inference", "-o", "out.onnx",
                     "-q")
    assert not UNUSED_BY_APPLY & modules, sorted(UNUSED_BY_APPLY & modules)
    assert "ngrules.interop.onnx.exporter" in modules  # the run did write a model
    import onnxruntime as ort

    x = np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]], np.float32)
    session = ort.InferenceSession(str(tmp_path / "out.onnx"))
    (got,) = session.run(None, {session.get_inputs()[0].name: x})
    np.testing.assert_allclose(got, np.maximum(x, 0.0) * 2.0 + 1.0, rtol=1e-6)


def test_the_lazy_public_names_are_served(tmp_path):
    """The names `import ngrules` no longer imports eagerly are still there, and real."""
    import ngrules as ng
    from ngrules.engine.explain import explain
    from ngrules.ir.graphfile import load_graph
    from ngrules.ir.stateful import Executor

    assert ng.explain is explain and ng.load_graph is load_graph and ng.Executor is Executor
    x = ng.placeholder([ng.make_axis(2, "B")])
    ng.save_graph(str(tmp_path / "g.json"), [ng.exp(x)])
    (out,) = ng.load_graph(str(tmp_path / "g.json"))
    assert out.op == "Exp"


def test_a_command_s_parser_alone_parses_as_the_whole_one():
    """Only the command named is registered: its arguments parse as with every command."""
    from ngrules.cli.main import build_parser

    argv = ["apply", "m.onnx", "-o", "o.onnx", "--pipeline", "inference", "--opset", "17"]
    whole, alone = build_parser().parse_args(argv), build_parser("apply").parse_args(argv)
    assert vars(whole).keys() == vars(alone).keys()
    assert {k: v for k, v in vars(whole).items() if k != "run"} == \
        {k: v for k, v in vars(alone).items() if k != "run"}
    sub = next(a for a in build_parser("apply")._actions if a.dest == "command")
    assert list(sub.choices) == ["apply"]


def test_the_library_folder_is_found_once_per_process():
    """Every location a run prints is shortened against it (`short_location`): found each time,
    it cost ~8 ms for ResNet-50's 176 firings."""
    from ngrules.lang.shipped import library_path, short_location

    assert library_path() is library_path()
    where = f"{library_path()}/simplify.rules:7"
    assert short_location(where) == "ngrules:rules/simplify.rules:7"


#: An `--ops` module that leaves marks: at `atexit`, when its module is torn down (`__del__` of
#: a global), and, with THREAD set, from a thread that is no daemon, once the main thread is
#: done (Python's own exit waits for it).
MARKS = """
import atexit, gc, os, threading
from pathlib import Path

HERE = Path(__file__).parent
(HERE / "gc.txt").write_text(str(gc.get_threshold()[0]))
atexit.register(lambda: (HERE / "atexit.txt").write_text("ran"))


class _Torn:  # holds what it needs: the module's other names may be gone when it is freed
    def __init__(self, path):
        self.path = path

    def __del__(self, open=open):
        with open(self.path, "w") as f:
            f.write("ran")


KEPT = _Torn(str(HERE / "teardown.txt"))
if os.environ.get("THREAD"):
    def _late():  # alive until the main thread is done: when the program ends, not before
        threading.main_thread().join()
        (HERE / "thread.txt").write_text("ran")

    threading.Thread(target=_late).start()
"""

#: What the `ngrules` script runs (pyproject.toml's [project.scripts]).
PROGRAM = "from ngrules.cli import command_line; command_line()"


def _program(folder: Path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROGRAM, *argv], cwd=folder,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_the_program_ends_without_the_interpreter_s_teardown(tmp_path):
    """`command_line` (the `ngrules` script) ends the process once `main` returns: the atexit
    functions run and every line printed is out, but no module is torn down (100-150 ms of
    CPU after an apply to ResNet-50). It ran with the program's garbage collector settings."""
    _model(tmp_path)
    (tmp_path / "marks.py").write_text(MARKS)
    proc = _program(tmp_path, "apply", "m.onnx", "-o", "out.onnx", "--ops", "marks.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("stopped: ")  # flushed into the pipe
    assert (tmp_path / "out.onnx").stat().st_size > 0
    assert (tmp_path / "atexit.txt").exists() and not (tmp_path / "teardown.txt").exists()
    assert (tmp_path / "gc.txt").read_text() == str(GC_THRESHOLD)  # `as_program`
    proc = _program(tmp_path, "apply", "missing.onnx", "-o", "out.onnx")
    assert proc.returncode == 2 and "missing.onnx" in proc.stderr


def test_a_thread_still_running_is_waited_for_as_python_does(tmp_path):
    _model(tmp_path)
    (tmp_path / "marks.py").write_text(MARKS)
    proc = _program(tmp_path, "apply", "m.onnx", "-o", "out.onnx", "--ops", "marks.py",
                    THREAD="1")
    assert proc.returncode == 0, proc.stderr
    # Python's own exit waited for the thread (its teardown may or may not free `KEPT`)
    assert (tmp_path / "thread.txt").exists() and (tmp_path / "atexit.txt").exists()


#: An `--ops` module that notes the BLAS setting the program's process runs with.
BLAS_MARK = """
import os
from pathlib import Path

Path(__file__).with_name("blas.txt").write_text(os.environ.get("OPENBLAS_THREAD_TIMEOUT", "-"))
"""


def _blas_setting(folder: Path, *command: str, **env: str) -> str:
    (folder / "blas_mark.py").write_text(BLAS_MARK)
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    proc = subprocess.run([*command, "ops", "--ops", "blas_mark.py"], cwd=folder,
                          capture_output=True, text=True,
                          env={**environ, "PYTHONPATH": str(ROOT), **env})
    assert proc.returncode == 0, proc.stderr
    return (folder / "blas.txt").read_text()


def test_the_program_s_blas_threads_sleep_when_idle(tmp_path):
    """The `ngrules` script and `python -m ngrules.cli.main` set OpenBLAS's idle threads to
    sleep at once (`ngrules.startup`: they spun ~50 ms of CPU through an apply's start); a user's
    own value is kept, and a process that imports ngrules otherwise is left as it was."""
    script = tmp_path / "ngrules"
    script.write_text(f"#!{sys.executable}\n{PROGRAM}\n")
    script.chmod(0o755)
    assert _blas_setting(tmp_path, str(script)) == "4"
    assert _blas_setting(tmp_path, sys.executable, "-m", "ngrules.cli.main") == "4"
    assert _blas_setting(tmp_path, str(script), OPENBLAS_THREAD_TIMEOUT="12") == "12"
    assert _blas_setting(tmp_path, sys.executable, "-c", PROGRAM) == "-"  # a library's user


def test_the_program_s_collector_settings_hold_from_its_first_import(tmp_path):
    """The program's garbage collector threshold is set as `import ngrules` starts, before
    numpy's and ngrules' imports make their objects; not in a library user's process."""
    code = "import ngrules, gc; print(gc.get_threshold()[0])"
    script = tmp_path / "ngrules"
    script.write_text(f"#!{sys.executable}\n{code}\n")
    script.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    python_s = subprocess.run([sys.executable, "-c", "import gc; print(gc.get_threshold()[0])"],
                              capture_output=True, text=True).stdout.strip()  # Python's own
    runs = (([str(script)], str(GC_THRESHOLD)), ([sys.executable, "-c", code], python_s))
    for command, threshold in runs:
        proc = subprocess.run(command, capture_output=True, text=True, env=env)
        assert proc.stdout.strip() == threshold, proc.stderr


def test_only_the_program_s_own_command_lines_count_as_the_program(monkeypatch):
    from ngrules import startup

    for argv, orig, program in [
        (["/usr/bin/ngrules", "apply"], [], True),
        (["-m"], ["python", "-P", "-m", "ngrules.cli.main", "apply"], True),
        (["-m"], ["python", "-mngrules"], True),
        (["-m"], ["python", "-m", "pytest", "-q"], False),
        (["-m"], ["python", "-m", "ngrulesx"], False),
        (["-c"], ["python", "-c", "import ngrules"], False),
        (["/usr/bin/ngrules-tool"], [], False),
        ([], [], False),
    ]:
        monkeypatch.setattr(sys, "argv", argv)
        monkeypatch.setattr(sys, "orig_argv", orig, raising=False)
        assert startup.is_the_program() is program, (argv, orig)
