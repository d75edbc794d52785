"""The checked rules of rules files kept in the private cache (issue 34, item 6): a warm load
does not type-check again, and anything that could change the answer misses."""

import pytest

from ngrules.errors import RuleErrors
from ngrules.lang import check_cache, code_cache
from ngrules.lang.functions import FUNCTIONS, FunctionDef
from ngrules.lang.loader import load_rules

TEXT = """pass p
rule r: x * 1 => x
rule s: x + y if len(x.axes) == 0 and value(x) == 0 => y
"""


@pytest.fixture
def checks(tmp_path, monkeypatch):
    """A fresh private cache folder, and the count of the checker's runs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(code_cache, "_FOLDER", [])
    monkeypatch.setattr(code_cache, "_MEMO", {})
    count = []
    real = check_cache.check

    def counted(*args):
        count.append(1)
        return real(*args)

    monkeypatch.setattr(check_cache, "check", counted)
    yield count


def _file(tmp_path, text=TEXT):
    path = tmp_path / "a.rules"
    path.write_text(text)
    return path


def test_a_warm_load_reads_the_checked_rules_back(checks, tmp_path):
    path = _file(tmp_path)
    first = load_rules(path)
    assert len(checks) == 1
    again = load_rules(path)
    assert len(checks) == 1  # not checked again
    assert again == first and again.passes == first.passes
    assert [r.location for r in again] == [r.location for r in first]
    r = again.rule("s")
    assert r.clauses[0] is r.decl.clauses[0] and r.replacement is r.decl.replacement
    assert again.passes["p"][0] is again.rules[0]  # one object, as the checker made it


def test_an_edited_file_misses(checks, tmp_path):
    path = _file(tmp_path)
    load_rules(path)
    path.write_text(TEXT.replace("x * 1", "x * 2"))
    edited = load_rules(path)
    assert len(checks) == 2
    assert "2" in repr(edited.rule("r").roots)


def test_a_changed_language_layer_or_function_library_misses(checks, tmp_path, monkeypatch):
    path = _file(tmp_path)
    load_rules(path)
    monkeypatch.setattr(code_cache, "code_digest", lambda above, root=None: "another checker")
    load_rules(path)
    assert len(checks) == 2
    monkeypatch.setitem(FUNCTIONS, "extra", FunctionDef("extra", lambda a, b=1: a, 1, 2))
    load_rules(path)
    assert len(checks) == 3
    load_rules(path)
    assert len(checks) == 3  # the same table: read back
    from ngrules.lang import grammar

    monkeypatch.setattr(grammar, "lark_digest", lambda: "another lark")
    load_rules(path)
    assert len(checks) == 4
    from dataclasses import replace

    from ngrules.ir.ops import OPS

    monkeypatch.setitem(OPS, "Zed", replace(OPS["Exp"], name="Zed"))  # as a model's ops are
    load_rules(path)
    assert len(checks) == 5


def test_a_corrupt_cache_file_is_checked_again(checks, tmp_path):
    path = _file(tmp_path)
    first = load_rules(path)
    (kept,) = (tmp_path / "home" / "ngrules" / "code").glob("*.checked")
    for broken in (b"", b"not a pickle", kept.read_bytes()[:-20]):
        kept.write_bytes(broken)
        assert load_rules(path) == first
    assert len(checks) == 4


def test_errors_are_never_kept_and_reported_at_every_load(checks, tmp_path):
    path = _file(tmp_path, TEXT + "rule t: Nope(x) => x\n")
    messages = []
    for _ in range(2):
        with pytest.raises(RuleErrors) as e:
            load_rules(path)
        messages.append([(m.message, str(m.span)) for m in e.value.errors])
    assert messages[0] == messages[1] and "unknown op 'Nope'" in messages[0][0][0]
    assert ":4:9" in messages[0][0][1]  # located
    assert len(checks) == 2
    assert not list((tmp_path / "home" / "ngrules" / "code").glob("*.checked"))


def test_warnings_are_reported_on_a_warm_load(checks, tmp_path):
    path = _file(tmp_path, TEXT + "# a comment with \u202e in it\n")
    first = load_rules(path)
    again = load_rules(path)
    assert len(checks) == 1
    assert first.warnings and [str(w) for w in again.warnings] == [str(w) for w in first.warnings]


def test_rules_that_cannot_be_kept_are_still_loaded(checks, tmp_path, monkeypatch):
    def refuse(rules, files):
        raise TypeError("cannot pickle")

    monkeypatch.setattr(check_cache, "_dumps", refuse)
    path = _file(tmp_path)
    assert len(load_rules(path)) == 2 and len(load_rules(path)) == 2
    assert len(checks) == 2  # nothing kept: checked each time
