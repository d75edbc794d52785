"""Every fenced block of README.md and docs/ runs: a doc snippet that fails is a failing test.

Blocks run by their language, each file's blocks in order in one folder (so a block may use what
an earlier one of its page declared or wrote): `python` is executed (a `test_*` function it
defines is called), `ngrules` is loaded and checked, `sh` lines are `ngrules` commands run in
this process, `toml` and `json` are parsed and read as ngrules reads them. `text` is output or a
diagram, shown and not run. A block whose first line is `# NAME.py` or `# NAME.rules` is also
saved as that file. Verification in a snippet runs with one example a rule (the `docs` profile):
its rules are verified in full by their own tests.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

import ngrules as ng
from ngrules.cli.main import build_parser, main
from ngrules.config import _tomllib

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = {"python", "ngrules", "sh", "toml", "json", "text"}

#: Commands shown in the docs whose run is a test of its own elsewhere (and long): they are
#: parsed by the command line here, so an option the docs show must still exist.
PARSED_ONLY = {
    ("pip",): "the install itself; CI's .ci/run does it",
    ("pytest",): "the test suite and `pytest rules/`: CI runs both",
    ("ngrules", "lsp"): "a server on stdin (tests/test_lsp.py)",
    ("ngrules", "demo"): "tests/test_cli_commands.py and CI run it",
    ("ngrules", "verify", "rules/"): "the whole library: `pytest rules/` verifies it",
    ("ngrules", "verify", "--prove"): "the whole library under z3: tests/test_prove.py",
}

settings.register_profile("docs", settings.get_profile("ci"), max_examples=1)


def blocks(page: Path) -> list[tuple[int, str, str]]:
    """(line, language, text) of each fenced block, fences paired in order."""
    found, current, info, start = [], None, "", 0
    for number, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
        if line.startswith("```") and current is None:
            current, info, start = [], line[3:].strip(), number
        elif line.startswith("```"):
            found.append((start, info, "\n".join(current) + "\n"))
            current = None
        elif current is not None:
            current.append(line)
    return found


def _tables() -> list[dict]:
    from ngrules.ir import declared
    from ngrules.lang import declared_ops

    return [dict(t) for t in (ng.OPS, declared.REFERENCE, declared.FAST, declared_ops.DECLARED)]


#: The op tables as a new process has them: built-in ops only.
FRESH_TABLES = _tables()


@pytest.fixture
def folder(tmp_path, monkeypatch, scratch_ops):
    """A project folder with what the docs' commands name: the rules, a graph and its input,
    ONNX models; the op table and registered functions restored afterwards."""
    pytest.importorskip("onnx")
    import onnx

    from ngrules.interop.onnx.examples import cnn, mlp
    from ngrules.lang import functions

    shutil.copytree(ROOT / "rules", tmp_path / "rules")
    c, n = ng.make_axis(4, "C"), ng.make_axis(8, "N")
    x = ng.placeholder([c, n], name="x")
    ng.save_graph(tmp_path / "g.json", [ng.tanh(ng.dot(ng.constant(np.ones(4), [c]), x) * 1.0)])
    np.save(tmp_path / "x.npy", np.ones((4, 8), np.float32))
    onnx.save(mlp(), tmp_path / "model.onnx")  # its batch N is symbolic
    for name, model in (("a", mlp()), ("b", cnn())):
        for value in [*model.graph.input, *model.graph.output]:
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param"):
                    dim.dim_value = 2
        onnx.save(model, tmp_path / f"{name}.onnx")
    for _, _, text in blocks(ROOT / "docs" / "ops.md"):  # README's my_ops.py and fuse.rules
        if text.startswith("# silu_ops.py"):
            (tmp_path / "my_ops.py").write_text(text)
        elif text.startswith("# fuse.rules"):
            (tmp_path / "fuse.rules").write_text(text)
    (tmp_path / "my.rules").write_text("pass mine\nrule exp_log: Exp(Log(a)) => a\n")
    saved_functions = dict(functions.FUNCTIONS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    profile = settings.get_current_profile_name()
    settings.load_profile("docs")
    yield tmp_path
    settings.load_profile(profile)
    functions.FUNCTIONS.clear()
    functions.FUNCTIONS.update(saved_functions)


def _save_named(text: str, folder: Path) -> None:
    first = text.lstrip().split("\n", 1)[0]
    name = first[2:].strip() if first.startswith("# ") else ""
    if name.endswith((".py", ".rules")) and "/" not in name and " " not in name:
        (folder / name).write_text(text)


def run_python(text: str, where: str, namespace: dict) -> None:
    exec(compile(text, where, "exec"), namespace)  # noqa: S102 - our own docs
    for name, value in list(namespace.items()):
        if name.startswith("test_") and callable(value):
            value()
            del namespace[name]


def run_rules(text: str, where: str, folder: Path) -> None:
    path = folder / "rules" / "doc_block.rules"  # beside the library: its imports resolve
    path.write_text(text)
    try:
        assert ng.load_rules(path) is not None, where
    finally:
        path.unlink()


def run_shell(text: str, where: str) -> None:
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        words = [w for w in words if not (w.startswith("[") or w.endswith("]"))]  # optional
        if not words:
            continue
        reason = next((r for k, r in PARSED_ONLY.items() if _starts(words, k)), None)
        if words[0] != "ngrules":
            assert reason, f"{where}: {line!r} is not an ngrules command"
            continue
        if reason:
            build_parser().parse_args(words[1:])  # exits (a failure) on an unknown option
            continue
        err = io.StringIO()
        with contextlib.redirect_stderr(err), as_a_new_process():
            code = main(words[1:])
        assert code in (0, 1), f"{where}: {line!r} exited {code}: {err.getvalue()}"


@contextlib.contextmanager
def as_a_new_process():
    """A command sees the op table as a new process would (the built-in ops only) and imports
    its ops modules afresh; the page's Python session is as it was afterwards."""
    from ngrules.ir import declared
    from ngrules.lang import declared_ops

    tables = (ng.OPS, declared.REFERENCE, declared.FAST, declared_ops.DECLARED)
    session = [dict(t) for t in tables]
    modules = set(sys.modules)
    for table, fresh in zip(tables, FRESH_TABLES):
        table.clear()
        table.update(fresh)
    try:
        yield
    finally:
        for table, old in zip(tables, session):
            table.clear()
            table.update(old)
        here = str(Path.cwd())
        for name in set(sys.modules) - modules:  # the folder's own modules, imported again
            path = str(getattr(sys.modules[name], "__file__", None) or "")
            if name.startswith("ngrules_ops_") or path.startswith(here):
                del sys.modules[name]


def _starts(words: list[str], key: tuple[str, ...]) -> bool:
    return tuple(words[: len(key)]) == key or (
        len(key) == 3 and words[:2] == list(key[:2]) and key[2] in words)


def run_toml(text: str, where: str) -> None:
    data = _tomllib().loads(text)  # the standard library's, or tomli before 3.11
    tool = data.get("tool", {}).get("ngrules")
    if tool is not None:  # read as ngrules reads it; each module it names is in the folder
        from ngrules.config import load_config

        Path("pyproject.toml").write_text(text)
        assert load_config().ops == tuple(tool["ops"]), where
        assert all(Path(f"{name}.py").is_file() for name in tool["ops"]), where
    else:
        assert data["project"]["entry-points"]["ngrules.ops"], where


def run_json(text: str, where: str) -> None:
    from ngrules.ir.graphfile import save_graph

    shown = json.loads(text)
    a = ng.make_axis(2, "A")
    save_graph("mine.json", [ng.sum(ng.placeholder([a], name="x"), out_axes=())])
    written = json.loads(Path("mine.json").read_text())
    assert set(shown) == set(written), where
    keys = set().union(*(node.keys() for node in written["nodes"]))
    assert all(set(node) <= keys | {"origin"} for node in shown["nodes"]), where


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_block_of_the_page_runs(page, folder, capsys):
    namespace: dict = {}
    for line, language, text in blocks(page):
        where = f"{page.relative_to(ROOT)}:{line}"
        assert language in LANGUAGES, f"{where}: a block needs a language ({sorted(LANGUAGES)})"
        _save_named(text, folder)
        if language == "python":
            run_python(text, where, namespace)
        elif language == "ngrules":
            run_rules(text, where, folder)
        elif language == "sh":
            run_shell(text, where)
        elif language == "toml":
            run_toml(text, where)
        elif language == "json":
            run_json(text, where)


def test_a_failing_snippet_fails(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\nimport ngrules as ng\nrules.rule('x')\n```\n")
    ((line, language, text),) = blocks(page)
    with pytest.raises(NameError):
        run_python(text, f"page.md:{line}", {})
    with pytest.raises(AssertionError, match="exited 2"):
        run_shell("ngrules show missing.json\n", "page.md:1")
