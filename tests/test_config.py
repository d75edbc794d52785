"""[tool.ngrules] in the nearest pyproject.toml, read only when nobody else could have put it
there."""

import os
import shutil
import subprocess

import pytest

from ngrules.config import ProjectConfig, load_config
from ngrules.errors import NgrulesError


def test_nearest_pyproject_is_read_from_a_subfolder(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.ngrules]\nops = ["my.ops"]\nrules = ["r/"]\n')
    (tmp_path / "a" / "b").mkdir(parents=True)
    config = load_config(tmp_path / "a" / "b")
    assert config.ops == ("my.ops",) and config.rules == ("r/",)
    assert config.root == tmp_path


def test_no_table_is_an_empty_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert load_config(tmp_path) == ProjectConfig(tmp_path / "pyproject.toml")


def test_a_file_that_does_not_name_ngrules_is_not_parsed(tmp_path):
    """No `ngrules` in the text: no table to read, so no TOML parser to import (issue 34); a
    broken file of another tool's is that tool's to report."""
    (tmp_path / "pyproject.toml").write_text("[project\nname = 'x'\n")
    assert load_config(tmp_path) == ProjectConfig(tmp_path / "pyproject.toml")


def test_a_table_named_through_an_escape_is_still_read(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool."\\u006egrules"]\nops = ["m"]\n')
    assert load_config(tmp_path).ops == ("m",)


@pytest.mark.parametrize(
    "text, words",
    [
        ("[tool.ngrules]\nopz = []\n", "unknown key(s) in [tool.ngrules]: opz"),
        ("[tool.ngrules]\nops = 'x'\n", "ops must be a list of strings"),
        ("[tool.ngrules\n", "cannot read [tool.ngrules]"),
    ],
)
def test_bad_tables_are_named_errors(tmp_path, text, words):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(NgrulesError) as e:
        load_config(tmp_path)
    assert words in str(e.value)


# -- issue 25: configuration names code, so only a trusted file is read ---------------------------
PLANTED = '[tool.ngrules]\nops = ["planted.py"]\n'


def _planted(folder):
    """A pyproject.toml whose ops module leaves a mark when imported."""
    (folder / "pyproject.toml").write_text(PLANTED)
    (folder / "planted.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('RAN').write_text('ran')\n"
    )


def test_a_pyproject_in_a_folder_everyone_may_write_is_ignored_with_a_warning(tmp_path, capsys):
    shared = tmp_path / "shared"
    (shared / "work").mkdir(parents=True)
    _planted(shared)
    shared.chmod(0o1777)  # like /tmp: sticky, but anyone can add a planted.py beside it
    assert load_config(shared / "work") == ProjectConfig()
    err = capsys.readouterr().err.splitlines()
    assert err == [f"ngrules: warning: ignoring [tool.ngrules] in {shared / 'pyproject.toml'}: "
                   f"its folder {shared} is writable by every user"]
    (shared / "pyproject.toml").write_text("[tool.ngrules\n")  # malformed: still only ignored
    assert load_config(shared / "work") == ProjectConfig()


def test_a_pyproject_of_another_user_is_ignored(tmp_path, monkeypatch, capsys):
    _planted(tmp_path)
    if os.getuid() == 0:  # root trusts its own files: give this one to somebody else
        os.chown(tmp_path / "pyproject.toml", 4242, -1)
    else:  # pretend to be somebody else
        monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path).st_uid + 1)
    assert load_config(tmp_path) == ProjectConfig()
    assert "belongs to another user" in capsys.readouterr().err


def test_a_world_writable_pyproject_is_ignored(tmp_path, capsys):
    _planted(tmp_path)
    (tmp_path / "pyproject.toml").chmod(0o666)
    assert load_config(tmp_path).ops == ()
    assert "is writable by every user" in capsys.readouterr().err


def test_a_planted_configuration_never_runs_from_the_command_line(tmp_path):
    """`ngrules check` below a world-writable folder with a planted pyproject.toml: one
    warning line, the command works, the planted module never runs."""
    from test_cli import run

    shared = tmp_path / "shared"
    (shared / "work").mkdir(parents=True)
    _planted(shared)
    shared.chmod(0o777)
    (shared / "work" / "a.rules").write_text("pass p\nrule r: x * 1 => x\n")
    for text in (PLANTED, "[tool.ngrules\n"):
        (shared / "pyproject.toml").write_text(text)
        proc = run("check", "a.rules", cwd=shared / "work")
        assert proc.returncode == 0, proc.stderr
        [line] = proc.stderr.splitlines()
        assert line.startswith("ngrules: warning: ignoring [tool.ngrules] in ")
        assert not (shared / "RAN").exists()


def test_commands_that_need_no_ops_import_none(tmp_path):
    """`fmt`, `show` and `lsp` do not import `[tool.ngrules] ops`; `check` does."""
    from test_cli import run

    import ngrules as ng

    _planted(tmp_path)
    (tmp_path / "a.rules").write_text("pass p\nrule r: x * 1 => x\n")
    ng.save_graph(tmp_path / "g.json", [ng.tanh(ng.placeholder({"A": 2}, name="x"))])
    assert run("fmt", "a.rules", "--check", cwd=tmp_path).returncode == 0
    assert run("show", "g.json", cwd=tmp_path).returncode == 0
    lsp = subprocess.run([shutil.which("ngrules"), "lsp"], cwd=tmp_path, input=b"",
                         capture_output=True, timeout=60)
    assert lsp.returncode == 1 and b"Traceback" not in lsp.stderr  # no shutdown: 1
    assert not (tmp_path / "RAN").exists()
    assert run("check", "a.rules", cwd=tmp_path).returncode == 0
    assert (tmp_path / "RAN").read_text() == "ran"
