"""The code generated for rules and the syntax trees of rules files, kept in the user's private
cache folder (issue 34, item 6): read back when trusted, ignored when not, rebuilt when broken."""

import os

import pytest

from ngrules.lang import code_cache
from ngrules.version import __version__


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh private cache folder for this test (the module's found-once folder reset)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(code_cache, "_FOLDER", [])
    monkeypatch.setattr(code_cache, "_MEMO", {})
    yield tmp_path / "ngrules" / "code"


def test_generated_code_is_compiled_once_and_read_back(cache, monkeypatch):
    source = "def f(x):\n    return x * 2 + 1\n"
    code = code_cache.compiled(source, "<ngrules test>")
    namespace = {}
    exec(code, namespace)  # noqa: S102 - the test's own source
    assert namespace["f"](3) == 7
    files = list(cache.glob("*.marshal"))
    assert len(files) == 1 and (files[0].stat().st_mode & 0o777) == 0o600
    code_cache._MEMO.clear()

    def no_compile(*args):
        raise AssertionError("compiled again: not read from the file")

    monkeypatch.setattr(code_cache, "compile", no_compile, raising=False)
    again = code_cache.compiled(source, "<ngrules test>")
    assert again.co_consts == code.co_consts  # the same code, from the file


def test_a_file_others_can_write_is_never_read(cache):
    source = "X = 1\n"
    code_cache.compiled(source, "<ngrules test>")
    (path,) = cache.glob("*.marshal")
    path.write_bytes(__import__("marshal").dumps(compile("X = 2\n", "<planted>", "exec")))
    os.chmod(path, 0o666)  # writable by others: planted, not ours to trust
    code_cache._MEMO.clear()
    namespace = {}
    exec(code_cache.compiled(source, "<ngrules test>"), namespace)  # noqa: S102
    assert namespace["X"] == 1


def test_a_rules_files_syntax_tree_is_kept_and_a_broken_one_parsed_again(cache, tmp_path):
    text = "pass p\nrule r: x * 1 => x\n"
    path = str(tmp_path / "a.rules")
    first = code_cache.parse_kept(text, path)
    (kept,) = cache.glob("*.ast")
    assert code_cache.parse_kept(text, path) == first
    kept.write_bytes(b"not a pickle")
    assert code_cache.parse_kept(text, path) == first  # parsed again
    assert code_cache.parse_kept(text.replace("x * 1", "x + 0"), path) != first  # the key


def test_a_text_without_a_file_is_not_kept(cache, tmp_path):
    code_cache.parse_kept("pass p\nrule r: x * 1 => x\n", str(tmp_path / "a.rules"))
    code_cache.parse_kept("pass q\nrule s: x + 0 => x\n", "<string>")  # a string: "<string>"
    assert len(list(cache.glob("*.ast"))) == 1


def test_a_full_folder_loses_its_oldest_half_and_keeps_what_is_new(cache, monkeypatch):
    """Thousands of generated rules once filled the folder for good: nothing new was kept,
    and every command parsed the shipped library again."""
    monkeypatch.setattr(code_cache, "_FILES", 8)
    code_cache.compiled("X = 0\n", "<ngrules test>")  # makes the folder
    for i in range(1, 8):
        (cache / f"old{i}.marshal").write_bytes(b"")
        os.utime(cache / f"old{i}.marshal", (i, i))  # old, in this order
    code_cache._FOLDER.clear()  # a new process finds the folder full
    code_cache._MEMO.clear()
    code_cache.compiled("Y = 1\n", "<ngrules test>")
    names = {p.name for p in cache.iterdir()}
    assert {"old5.marshal", "old6.marshal", "old7.marshal"} <= names
    assert not names & {"old1.marshal", "old2.marshal", "old3.marshal", "old4.marshal"}
    assert len(names) == 5  # half of 8 kept, and the new file written


def test_a_changed_source_of_the_language_layer_misses_the_kept_tree(cache, tmp_path,
                                                                      monkeypatch):
    text, path = "pass p\nrule r: x * 1 => x\n", str(tmp_path / "a.rules")
    first = code_cache.parse_kept(text, path)
    assert code_cache.parse_kept(text, path) == first and len(list(cache.glob("*.ast"))) == 1
    monkeypatch.setattr(code_cache, "code_digest", lambda above, root=None: "another parser")
    assert code_cache.parse_kept(text, path) == first
    assert len(list(cache.glob("*.ast"))) == 2  # parsed again, kept under the new key


def test_the_parse_digest_covers_the_language_layer_and_below(tmp_path):
    package = tmp_path / "ngrules"
    for name in ("lang/syntax.py", "ir/ops.py", "engine/match.py", "verification/verify.py",
                 "cli/main.py", "errors.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(f"# {name}\n")
    (tmp_path / "grammar").mkdir()
    (tmp_path / "grammar" / "ngrules.lark").write_text("start: rule\n")
    digest = lambda: code_cache.code_digest(code_cache.ABOVE, package)  # noqa: E731
    assert digest() != code_cache.code_digest(code_cache.ABOVE)  # the fake package is not ours

    def changed(name: str, text: str) -> bool:
        before = digest()
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
        code_cache.forget_code_digests()  # once per process: a new process sees the change
        return digest() != before

    for above in ("cli/main.py", "verification/verify.py", "engine/match.py",
                  "interop/onnx.py"):
        assert not changed(f"ngrules/{above}", "# changed\n"), above
    assert changed("ngrules/lang/syntax.py", "# a new node\n")
    assert changed("ngrules/lang/parser.py", "# a new module\n")
    assert changed("ngrules/ir/ops.py", "# a new op\n")
    assert changed("ngrules/errors.py", "# a new error\n")
    assert changed("grammar/ngrules.lark", "start: rule+\n")
    assert code_cache.code_digest(code_cache.ABOVE, tmp_path / "no" / "ngrules") == __version__


def test_another_lark_misses_the_kept_tree(cache, tmp_path, monkeypatch):
    """The key names the installed lark (a digest of its `__init__.py`, read without importing
    it): another version may parse the same text otherwise."""
    from ngrules.lang import grammar

    text, path = "pass p\nrule r: x * 1 => x\n", str(tmp_path / "a.rules")
    first = code_cache.parse_kept(text, path)
    assert len(grammar.lark_digest()) == 16  # lark is installed: its file was read
    monkeypatch.setattr(grammar, "lark_digest", lambda: "another lark")
    assert code_cache.parse_kept(text, path) == first
    assert len(list(cache.glob("*.ast"))) == 2  # parsed again, kept under the new key


def test_apply_from_the_cache_imports_no_lark_nor_importlib_metadata(tmp_path):
    """`ngrules apply` reads the shipped library's trees from the cache: lark (30-40 ms of the
    command's start) is imported only by the first run, which parses and keeps them; and no
    installed package declares `ngrules.ops` entry points, so importlib.metadata (10-25 ms to
    import and scan) is never imported."""
    import subprocess
    import sys

    graph = tmp_path / "g.json"
    code = ("import sys; from ngrules.cli import main; from ngrules.ir import frontend as F; "
            "from ngrules.ir.axes import make_axis; from ngrules.ir.graphfile import save_graph; "
            "x = F.placeholder([make_axis(3, 'N')], name='x'); "
            f"save_graph({str(graph)!r}, [F.add(x, F.constant(0.0))]); "
            f"code = main(['apply', {str(graph)!r}, '-o', {str(tmp_path / 'out.json')!r}]); "
            "print(code, 'lark' in sys.modules, 'importlib.metadata' in sys.modules)")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                           cwd=tmp_path) for _ in range(2)]
    assert [r.stdout.split()[-3:] for r in runs] == [["0", "True", "False"]] + \
        [["0", "False", "False"]], [r.stderr[-500:] for r in runs]  # no ngrules.ops entry point


def test_a_run_that_only_reads_never_lists_the_folder(cache, monkeypatch):
    """Listing a folder of thousands of files costs milliseconds: only a writer does it."""
    code_cache.compiled("Z = 3\n", "<ngrules test>")
    code_cache._FOLDER.clear()  # a new process
    code_cache._MEMO.clear()
    listed = []
    monkeypatch.setattr(code_cache, "_room", lambda folder: listed.append(folder) or True)
    code_cache.compiled("Z = 3\n", "<ngrules test>")  # read back
    assert not listed
    code_cache.compiled("W = 4\n", "<ngrules test>")  # new: written, room asked once
    code_cache.compiled("V = 5\n", "<ngrules test>")
    assert len(listed) == 1 and len(list(cache.glob("*.marshal"))) == 3
