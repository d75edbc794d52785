"""The parser's cache is never a pickle in a shared folder (issue 11, item 1)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from ngrules.lang import parser_cache
from ngrules.lang.parser import grammar_text

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")


class _Planted:
    """A pickle that creates a marker file when loaded: proof that the cache was unpickled."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    shared = tmp_path / "shared"
    shared.mkdir(exist_ok=True)
    env.update(TMPDIR=str(shared), XDG_CACHE_HOME=str(tmp_path / "cache"), HOME=str(tmp_path))
    return env


def _run(code: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)


def test_a_pickle_planted_in_the_shared_temp_folder_is_never_loaded(tmp_path):
    env = _env(tmp_path)
    # lark's own cache name for this grammar (what `cache=True` reads): anyone can compute it.
    _run(
        "from lark import Lark; from ngrules.lang.parser import grammar_text; "
        "Lark(grammar_text(), parser='lalr', lexer='basic', cache=True)",
        env,
    )
    planted = list((tmp_path / "shared").glob(".lark*"))
    assert planted
    marker = tmp_path / "code-ran"
    for path in planted:
        path.write_bytes(b"anything\n" + pickle.dumps(_Planted(marker)))
    _run("from ngrules.lang.parser import parse; parse('rule r: Exp(x) => x')", env)
    assert not marker.exists()
    assert [p.name for p in (tmp_path / "shared").iterdir()] == [p.name for p in planted]


def test_the_cache_is_a_private_file_in_the_users_cache_folder(tmp_path):
    env = _env(tmp_path)
    _run("from ngrules.lang.parser import parse; parse('rule r: Exp(x) => x')", env)
    folder = tmp_path / "cache" / "ngrules"
    assert folder.stat().st_mode & 0o777 == 0o700
    (cached,) = folder.iterdir()
    assert cached.stat().st_mode & 0o077 == 0
    assert not list((tmp_path / "shared").iterdir())


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_a_folder_others_can_write_is_not_used(cache_home):
    (cache_home / "ngrules").mkdir(mode=0o700)
    os.chmod(cache_home / "ngrules", 0o777)
    assert parser_cache.cache_folder() is None
    assert parser_cache.cache_file(grammar_text(), '1') is None


def test_a_cache_home_others_can_write_is_not_used(cache_home):
    os.chmod(cache_home, 0o777)
    assert parser_cache.cache_folder() is None
    os.chmod(cache_home, 0o755)
    assert parser_cache.cache_folder() == cache_home / "ngrules"


def test_a_folder_owned_by_someone_else_is_not_used(cache_home, monkeypatch):
    assert parser_cache.cache_folder() == cache_home / "ngrules"
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    assert parser_cache.cache_folder() is None


def test_a_symlinked_folder_is_not_used(cache_home, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    os.chmod(elsewhere, 0o700)
    (cache_home / "ngrules").symlink_to(elsewhere)
    assert parser_cache.cache_folder() is None


def test_a_cache_file_others_can_write_is_removed_unread(cache_home):
    path = Path(parser_cache.cache_file(grammar_text(), '1'))
    path.write_bytes(b"planted")
    os.chmod(path, 0o666)
    assert parser_cache.cache_file(grammar_text(), '1') == str(path)
    assert not path.exists()


def test_a_relative_cache_home_is_ignored(monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert parser_cache.cache_folder() is None
