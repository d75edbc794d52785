"""The shipped library from anywhere: `import "ngrules:cpu.rules"` and `ng.load_library()`."""

import pytest

import ngrules as ng
from ngrules.lang.library import library_path


def test_a_rules_file_anywhere_imports_the_shipped_library(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.rules").write_text(
        'import "ngrules:cpu.rules"\n'
        "pass mine\nrule exp_log: Exp(Log(x)) => x\n"
        "pipeline mine_then_cpu: mine, relu_fusion, simplify, dot_lowering, shaping\n"
    )
    rules = ng.load_rules("mine.rules")
    library = ng.load_rules(library_path() / "cpu.rules")
    assert {r.name for r in library} < {r.name for r in rules}
    assert rules.pipelines["cpu"] == library.pipelines["cpu"]
    assert "mine_then_cpu" in rules.pipelines and rules.rule("exp_log").pass_name == "mine"


@pytest.mark.parametrize(
    "path, message",
    [
        ("ngrules:../README.md", "a library import names one file of the shipped library"),
        ("ngrules:", "a library import names one file"),
        ("ngrules:sub/dot.rules", "a library import names one file"),
        ("ngrules:nope.rules", "there is no file"),
    ],
)
def test_bad_library_imports_are_located_errors(path, message):
    with pytest.raises(ng.RuleErrors, match="cannot import") as info:
        ng.parse_rules(f'import "{path}"\n', "t.rules")
    assert message in str(info.value) and "t.rules:1:1" in str(info.value)


def test_load_rules_and_the_command_line_take_library_names(tmp_path, monkeypatch, capsys):
    from ngrules.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert set(ng.load_rules("ngrules:nn.rules").pipelines) == {"cpu", "fuse_nn", "inference"}
    assert main(["check", "ngrules:relu.rules"]) == 0
    assert "2 rules in 1 pass, 0 pipelines" in capsys.readouterr().out
