"""Every example in the README runs: its Python block, and its rules file loads."""

import subprocess
import sys
from pathlib import Path

import ngrules as ng

README = Path(__file__).resolve().parent.parent / "README.md"


def blocks(language: str) -> list[str]:
    """The fenced blocks opened with ```language (line by line: fences pair up in order)."""
    found, current, info = [], None, ""
    for line in README.read_text(encoding="utf-8").split("\n"):
        if line.startswith("```") and current is None:
            current, info = [], line[3:].strip()
        elif line.startswith("```"):
            if info == language:
                found.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return found


def test_the_python_example_runs_unchanged_from_a_folder_outside_the_repository(tmp_path):
    """In a fresh interpreter whose current folder is a temporary one."""
    (code,) = [b for b in blocks("python") if "ng.rewrite" in b]
    check = "\nassert res.stop == 'fixpoint'\nprint('README-OK', len(rules))\n"
    proc = subprocess.run(
        [sys.executable, "-c", code + check], cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "README-OK" in proc.stdout and "rule dot_matrix_matrix" in proc.stdout
    assert README.parent not in tmp_path.parents


def test_the_python_example_runs(capsys):
    (code,) = [b for b in blocks("python") if "ng.rewrite" in b]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    assert namespace["res"].stop == "fixpoint"
    assert [n.op for n in ng.toposort(namespace["res"].outputs)].count("Dot") == 0
    assert "rule dot_matrix_matrix" in capsys.readouterr().out


def test_the_rules_file_example_loads():
    (text,) = [b for b in blocks("ngrules") if b.lstrip().startswith("# rules/simplify.rules")]
    rules = ng.parse_rules(text, "README.rules")
    assert [r.name for r in rules][:2] == ["mul_one", "add_zero"] and "dot_lowering" in rules.passes
