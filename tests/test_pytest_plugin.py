"""The pytest plugin: configured `.rules` files are verified rule by rule; others are left alone."""

import subprocess
import sys
import textwrap

pytest_plugins = ["pytester"]

GOOD = """
pass simplify
rule mul_one: x * 1 => x
rule add_zero: x + 0 => x
"""

BROKEN = """
pass simplify
rule neg_sub: -(x - y) => x - y   # the sign is lost
"""

UDEV = """\
# an unrelated project's udev rules file
SUBSYSTEM=="usb", ATTR{idVendor}=="1234", MODE="0666"
ACTION=="add", KERNEL=="ttyUSB*", SYMLINK+="modem"
"""

OPT_IN = '[tool.ngrules]\nrules = ["."]\n'


def run_pytest(folder, *args):
    cmd = [sys.executable, "-m", "pytest", str(folder), "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=folder)


def write(folder, name, text):
    (folder / name).write_text(textwrap.dedent(text))


def test_each_rule_is_an_item_and_a_broken_one_fails_readably(tmp_path):
    write(tmp_path, "pyproject.toml", OPT_IN)
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
    write(tmp_path, "pyproject.toml", OPT_IN)
    write(tmp_path, "typo.rules", "rule r: Log(Exq(x)) => x\n")
    result = run_pytest(tmp_path)
    assert result.returncode != 0
    assert "unknown op 'Exq' (did you mean 'Exp'?)" in result.stdout


def test_python_tests_next_to_rules_files_are_untouched(tmp_path):
    write(tmp_path, "test_plain.py", "def test_plain():\n    assert True\n")
    write(tmp_path, "notes.txt", "rule r: x => y\n")
    result = run_pytest(tmp_path, "-q")
    assert result.returncode == 0 and "1 passed" in result.stdout


def collect(pytester) -> tuple[int, str]:
    """`pytest --collect-only -q` in pytester's folder, in this process: its output."""
    result = pytester.runpytest_inprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    return result.ret, "\n".join(result.outlines)


def test_an_unrelated_rules_file_is_not_collected(tmp_path):
    """Acceptance: a project with a udev rules file and ngrules installed; pytest passes."""
    write(tmp_path, "99-udev.rules", UDEV)
    write(tmp_path, "test_plain.py", "def test_plain():\n    assert True\n")
    result = run_pytest(tmp_path, "-q")
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout
    assert "99-udev" not in result.stdout


def test_not_even_a_configured_folder_fails_on_a_file_that_is_not_ngrules(pytester):
    write(pytester.path, "pyproject.toml", OPT_IN)
    write(pytester.path, "99-udev.rules", UDEV)
    write(pytester.path, "good.rules", GOOD)
    code, out = collect(pytester)
    assert code == 0 and "2 tests collected" in out and "99-udev" not in out, out


def test_the_ini_option_opts_a_folder_in(pytester):
    (pytester.path / "mine").mkdir()
    write(pytester.path, "pytest.ini", "[pytest]\nngrules_rules = mine\n")
    write(pytester.path / "mine", "good.rules", GOOD)
    write(pytester.path, "other.rules", GOOD)
    code, out = collect(pytester)
    assert "mine/good.rules::mul_one" in out, out
    assert "other.rules" not in out and "2 tests collected" in out


def test_a_conftest_marker_opts_its_folder_in(pytester):
    (pytester.path / "mine").mkdir()
    write(pytester.path / "mine", "conftest.py", "ngrules_rules = True\n")
    write(pytester.path / "mine", "good.rules", GOOD)
    write(pytester.path, "other.rules", GOOD)
    code, out = collect(pytester)
    assert "mine/good.rules::add_zero" in out and "other.rules" not in out, out


def test_a_file_named_on_the_command_line_is_collected(pytester):
    write(pytester.path, "good.rules", GOOD)
    result = pytester.runpytest_inprocess("good.rules", "--collect-only", "-q")
    assert "good.rules::mul_one" in "\n".join(result.outlines)
