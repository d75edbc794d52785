"""`import` in rules files reads only `.rules` files inside the folders loaded or an explicit
search path, and never quotes a file that is not a `.rules` file (issue 11, item 10)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

import ngrules as ng

SECRET = "hunter2-do-not-print"
RULE = "pass p\nrule neg_neg: -(-x) => x\n"


def ngrules(*args, cwd, env=None):
    exe = shutil.which("ngrules")
    assert exe
    return subprocess.run(
        [exe, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def tree(tmp_path):
    """proj/main.rules, proj/lib/shared.rules, and outside/other.rules, secret.txt."""
    (tmp_path / "proj" / "lib").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "proj" / "lib" / "shared.rules").write_text(RULE)
    (tmp_path / "outside" / "other.rules").write_text("pass q\nrule other: Log(Exp(x)) => x\n")
    (tmp_path / "secret.txt").write_text(f"password = {SECRET}\n")
    return tmp_path


def _errors(call) -> list[str]:
    with pytest.raises(ng.RuleErrors) as err:
        call()
    return [str(e) for e in err.value.errors]


@pytest.mark.parametrize(
    "target", ["../secret.txt", "../../secret.txt", "/proc/self/environ", "/etc/passwd"]
)
def test_only_rules_files_can_be_imported(tree, target):
    (tree / "proj" / "main.rules").write_text(f'import "{target}"\n')
    (error,) = _errors(lambda: ng.load_rules(tree / "proj"))
    assert "main.rules:1:1: error: cannot import" in error
    assert "only .rules files can be imported" in error and SECRET not in error


def test_the_environment_is_never_printed_by_an_import(tree):
    (tree / "proj" / "main.rules").write_text('import "/proc/self/environ"\n')
    proc = ngrules("check", "proj", cwd=tree, env={"NGRULES_TEST_SECRET": SECRET})
    assert proc.returncode == 1 and "only .rules files" in proc.stderr
    assert SECRET not in proc.stderr + proc.stdout


def test_a_rules_file_outside_the_folders_loaded_needs_the_search_path(tree):
    (tree / "proj" / "main.rules").write_text('import "../outside/other.rules"\n')
    (error,) = _errors(lambda: ng.load_rules(tree / "proj"))
    assert "is outside the folders being loaded" in error and "search path" in error
    rules = ng.load_rules(tree / "proj", search_path=[tree / "outside"])
    assert sorted(r.name for r in rules.rules) == ["neg_neg", "other"]


def test_the_command_line_takes_the_search_path(tree):
    (tree / "proj" / "main.rules").write_text('import "../outside/other.rules"\n')
    refused = ngrules("check", "proj", cwd=tree)
    assert refused.returncode == 1 and "outside the folders being loaded" in refused.stderr
    allowed = ngrules("check", "proj", "--import-path", "outside", cwd=tree)
    assert allowed.returncode == 0, allowed.stderr


def test_imports_are_found_beside_the_importer_then_in_the_search_path(tree):
    (tree / "proj" / "main.rules").write_text('import "lib/shared.rules"\nimport "other.rules"\n')
    rules = ng.load_rules(tree / "proj" / "main.rules", search_path=[tree / "outside"])
    assert [r.name for r in rules.rules] == ["neg_neg", "other"]
    (error,) = _errors(lambda: ng.load_rules(tree / "proj" / "main.rules"))
    assert "cannot import 'other.rules': there is no file" in error


def test_a_symlink_out_of_the_tree_is_outside_it(tree):
    (tree / "proj" / "link.rules").symlink_to(tree / "outside" / "other.rules")
    (tree / "proj" / "main.rules").write_text('import "link.rules"\n')
    errors = _errors(lambda: ng.load_rules(tree / "proj" / "main.rules"))
    assert any("is outside the folders being loaded" in e for e in errors)


def test_parse_rules_imports_from_its_folder_only(tree):
    text = 'import "../outside/other.rules"\n'
    (error,) = _errors(lambda: ng.parse_rules(text, str(tree / "proj" / "main.rules")))
    assert "outside the folders being loaded" in error
    rules = ng.parse_rules('import "lib/shared.rules"\n', str(tree / "proj" / "main.rules"))
    assert [r.name for r in rules.rules] == ["neg_neg"]


def test_a_syntax_error_in_a_file_not_named_rules_never_quotes_it(tree):
    (error,) = _errors(lambda: ng.load_rules(tree / "secret.txt"))
    assert error.startswith(f"{tree / 'secret.txt'}:1:")
    assert "not a .rules file" in error and SECRET not in error and "password" not in error
    for command in ("check", "fmt"):
        proc = ngrules(command, "secret.txt", cwd=tree)
        assert proc.returncode in (1, 2) and "secret.txt:1:" in proc.stderr, proc.stderr
        assert SECRET not in proc.stderr and "password" not in proc.stderr
    assert SECRET in (tree / "secret.txt").read_text()


def test_a_syntax_error_in_a_rules_file_still_quotes_the_line(tree):
    (tree / "bad.rules").write_text("rule r: x => $\n")
    (error,) = _errors(lambda: ng.load_rules(tree / "bad.rules"))
    assert "unexpected character '$'" in error and "rule r: x => $" in error


@pytest.mark.parametrize("name", ["ngrules:nope.rules", "ngrules:cpu"])
def test_a_bad_library_import_is_one_error_and_never_a_local_file(tmp_path, name):
    """A library name that is not in the library is refused once; it is not looked for again
    as a path beside the importer (where a file of that very name would have been read)."""
    if os.name != "nt":
        (tmp_path / name).write_text("rule read_by_mistake: =>\n")  # a second error if read
    main = tmp_path / "main.rules"
    main.write_text(f'import "{name}"\n')
    with pytest.raises(ng.RuleErrors) as info:
        ng.load_rules(main)
    assert len(info.value.errors) == 1
    assert f"cannot import {name!r}" in str(info.value)
