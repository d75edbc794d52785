"""The verdict cache (issue 35 item 7): a repeatable run reads what an earlier one computed,
keyed by the rule's text, the ops it uses, the settings and the version; a changed rule or op
misses; a corrupt entry is ignored; `--no-cache`, `--rule NAME` and progress lines.
(conftest gives each test a cache folder of its own.)"""

import os
import stat
from pathlib import Path

import pytest
from hypothesis import settings

import ngrules as ng
from ngrules.cli.main import main
from ngrules.ir import declared
from ngrules.lang import code_cache
from ngrules.verification import cache
from ngrules.verification import verify as verifying
from ngrules.verification.verify import verify

TEXT = "pass p\nrule mul_one: x * 1 => x\nrule neg_neg: -(-x) => x\n"


def _entries() -> list[Path]:
    return sorted((Path(os.environ[cache.ENV]) / "entries").glob("*.json"))


def test_a_repeated_run_reads_its_verdicts_from_the_cache():
    rules = ng.parse_rules(TEXT, "t.rules")
    first = verify(rules, 5, seed=3)
    assert not any(v.cached for v in first) and len(_entries()) == 2
    again = verify(rules, 5, seed=3)
    assert all(v.cached for v in again) and "2 from the cache" in again.summary()
    assert [v.headline for v in again] == [v.headline for v in first]
    assert [v.examples for v in again] == [v.examples for v in first]
    assert not any(v.cached for v in verify(rules, 5, seed=3, cache=False))
    assert not any(v.cached for v in verify(rules, 6, seed=3))  # other settings: other keys
    assert not any(v.cached for v in verify(rules, 5, seed=4))


def test_the_folder_is_private():
    verify(ng.parse_rules(TEXT, "t.rules"), 5, seed=3)
    for path in (Path(os.environ[cache.ENV]), *_entries()):
        assert not stat.S_IMODE(path.stat().st_mode) & 0o077


def test_a_run_with_a_random_seed_neither_reads_nor_writes(monkeypatch):
    real = verifying._settings  # a profile that is not derandomized (as `dev`), whichever
    monkeypatch.setattr(verifying, "_settings",  # profile runs the tests: a random seed
                        lambda n: settings(real(n), derandomize=False))
    report = verify(ng.parse_rules(TEXT, "t.rules"), 5)
    assert report.seed is not None and _entries() == []


def test_a_changed_rule_misses_and_the_unchanged_one_hits():
    verify(ng.parse_rules(TEXT, "t.rules"), 5, seed=3)
    changed = TEXT.replace("-(-x) => x", "-(-x) => x * 1")
    report = verify(ng.parse_rules(changed, "t.rules"), 5, seed=3)
    assert [v.cached for v in report] == [True, False]


def test_an_earlier_rule_of_the_pass_is_part_of_the_key():
    verify(ng.parse_rules(TEXT, "t.rules"), 5, seed=3)
    added = TEXT.replace("pass p\n", "pass p\nrule twice: x * 2 => x + x\n")
    assert [v.cached for v in verify(ng.parse_rules(added, "t.rules"), 5, seed=3)] == [
        False, False, False]


def test_a_changed_op_declaration_changes_the_key(monkeypatch, scratch_ops):
    rules = ng.parse_rules("op Twice(x) = x + x\npass p\nrule r: Twice(x) => x * 2\n", "t.rules")
    rule = rules.rule("r")
    before = cache.rule_text(rule)
    assert "op Twice(x) = x + x" in before
    monkeypatch.setitem(declared.SOURCE, "Twice", "op Twice(x) = x * 2")
    assert cache.rule_text(rule) != before
    monkeypatch.setitem(declared.FAST, "Twice", lambda x: 2 * x)  # a Python kernel: no key
    assert cache.rule_text(rule) is None


def test_a_changed_verifier_source_misses(monkeypatch):
    rules = ng.parse_rules(TEXT, "t.rules")
    verify(rules, 5, seed=3)
    assert all(v.cached for v in verify(rules, 5, seed=3))
    monkeypatch.setattr(cache, "code_digest", lambda: "another verifier")
    report = verify(rules, 5, seed=3)
    assert not any(v.cached for v in report) and report.ok
    assert cache.last_verdict(rules.rule("mul_one")).cached  # `last/` too: written again


def test_the_code_digest_covers_the_layers_that_decide_a_verdict(tmp_path):
    package = tmp_path / "ngrules"
    for name in ("verification/prove/prover.py", "ir/executor.py", "cli/verify.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(f"# {name}\n")
    (tmp_path / "grammar").mkdir()
    (tmp_path / "grammar" / "ngrules.lark").write_text("start: rule\n")
    assert cache.code_digest(package) != cache.code_digest()  # the fake package is not ours

    def changed(name: str, text: str) -> bool:
        before = cache.code_digest(package)
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
        code_cache.forget_code_digests()  # once per process: a new process sees the change
        return cache.code_digest(package) != before

    assert not changed("ngrules/cli/verify.py", "# a new option\n")  # above the verifier
    assert changed("ngrules/verification/prove/prover.py", "# a new axiom\n")
    assert changed("ngrules/ir/executor.py", "# a new kernel\n")
    assert changed("grammar/ngrules.lark", "start: rule+\n")
    assert changed("ngrules/engine/match.py", "# a new module\n")


def test_a_corrupt_entry_is_ignored_and_replaced():
    rules = ng.parse_rules(TEXT, "t.rules")
    verify(rules, 5, seed=3)
    for path in _entries():
        path.write_text("{not json")
    assert cache.last_verdict(rules.rule("mul_one")) is not None  # `last/` is intact
    report = verify(rules, 5, seed=3)
    assert report.ok and not any(v.cached for v in report)
    assert all(v.cached for v in verify(rules, 5, seed=3))  # written again


def test_last_verdict_is_the_api_for_the_hover():
    rules = ng.parse_rules(TEXT, "t.rules")
    assert cache.last_verdict(rules.rule("mul_one")) is None
    verify(rules, 5, seed=3, only=["mul_one"])
    last = cache.last_verdict(rules.rule("mul_one"))
    assert last.status == "verified" and last.headline.startswith("verified      mul_one")
    assert cache.last_verdict(rules.rule("neg_neg")) is None


def test_a_failing_verdict_is_not_cached():
    rules = ng.parse_rules("pass p\nrule bad: x * 2 => x\n", "t.rules")
    assert verify(rules, 5, seed=3)["bad"].status == "wrong"
    assert _entries() == [] and cache.last_verdict(rules.rule("bad")) is None


def test_progress_prints_one_line_per_rule_on_stderr(capsys):
    verify(ng.parse_rules(TEXT, "t.rules"), 5, seed=3, progress=True)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("[1/2] verified") and "mul_one" in err[0]
    assert err[1].startswith("[2/2] verified") and "neg_neg" in err[1]


def test_verify_one_rule_by_name_and_a_wrong_name_says_what_it_meant(tmp_path, capsys):
    path = tmp_path / "t.rules"
    path.write_text(TEXT)
    assert main(["verify", str(path), "--rule", "neg_neg", "--examples", "5"]) == 0
    out = capsys.readouterr().out
    assert "neg_neg" in out and "mul_one" not in out and "1 verified of 1 rules" in out
    assert main(["verify", str(path), "--rule", "neg_ne"]) == 2
    assert "did you mean 'neg_neg'?" in capsys.readouterr().err


def test_the_cli_caches_and_no_cache_bypasses(tmp_path, capsys):
    path = tmp_path / "t.rules"
    path.write_text(TEXT)
    assert main(["verify", str(path), "--examples", "5"]) == 0
    assert "from the cache" not in capsys.readouterr().out
    assert main(["verify", str(path), "--examples", "5"]) == 0
    assert "2 from the cache" in capsys.readouterr().out
    assert main(["verify", str(path), "--examples", "5", "--no-cache"]) == 0
    assert "from the cache" not in capsys.readouterr().out


@pytest.mark.parametrize("value", ["", "relative/dir"])
def test_the_default_folder_follows_xdg_cache_home(monkeypatch, tmp_path, value):
    monkeypatch.delenv(cache.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", value or str(tmp_path))
    found = cache.folder()
    if value:  # a relative XDG_CACHE_HOME is ignored (the XDG spec): no cache
        assert found is None
    else:
        assert found == tmp_path / "ngrules" / "verdicts"
