"""The pytest plugin: `pytest <folder of .rules>` verifies each rule as a test item."""

import subprocess
import sys
import textwrap

GOOD = """
pass simplify
rule mul_one: x * 1 => x
rule add_zero: x + 0 => x
"""

BROKEN = """
pass simplify
rule neg_sub: -(x - y) => x - y   # the sign is lost
"""


def run_pytest(folder, *args):
    cmd = [sys.executable, "-m", "pytest", str(folder), "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=folder)


def write(folder, name, text):
    (folder / name).write_text(textwrap.dedent(text))


def test_each_rule_is_an_item_and_a_broken_one_fails_readably(tmp_path):
    write(tmp_path, "good.rules", GOOD)
    write(tmp_path, "broken.rules", BROKEN)
    result = run_pytest(tmp_path, "--ngrules-examples=10", "-v")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "good.rules::mul_one PASSED" in out and "good.rules::add_zero PASSED" in out
    assert "broken.rules::neg_sub FAILED" in out
    assert "counterexample for rule neg_sub (" in out and "broken.rules:3)" in out
    assert "results differ" in out and "inputs:" in out and "Negative(" in out
    assert "2 passed, 1 failed" in out.replace("1 failed, 2 passed", "2 passed, 1 failed")


def test_a_rules_file_that_does_not_load_is_a_collection_error(tmp_path):
    write(tmp_path, "typo.rules", "rule r: Log(Exq(x)) => x\n")
    result = run_pytest(tmp_path)
    assert result.returncode != 0
    assert "unknown op 'Exq' (did you mean 'Exp'?)" in result.stdout


def test_python_tests_next_to_rules_files_are_untouched(tmp_path):
    write(tmp_path, "test_plain.py", "def test_plain():\n    assert True\n")
    write(tmp_path, "notes.txt", "rule r: x => y\n")
    result = run_pytest(tmp_path, "-q")
    assert result.returncode == 0 and "1 passed" in result.stdout
