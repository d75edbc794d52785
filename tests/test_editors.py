"""The VS Code extension's files: what `vsce package` needs, and a grammar that marks kinds."""

from __future__ import annotations

import json
import re
from pathlib import Path

VSCODE = Path(__file__).resolve().parent.parent / "editors" / "vscode"


def _minimum(spec: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.match(r"\^?(\d+)\.(\d+)\.(\d+)", spec).groups())


def test_the_engine_is_what_the_language_client_needs():
    package = json.loads((VSCODE / "package.json").read_text())
    lock = json.loads((VSCODE / "package-lock.json").read_text())
    client = lock["packages"]["node_modules/vscode-languageclient"]
    assert _minimum(package["engines"]["vscode"]) >= _minimum(client["engines"]["vscode"])


def test_the_package_has_what_vsce_asks_for():
    package = json.loads((VSCODE / "package.json").read_text())
    assert package["repository"]["url"] and package["license"] == "Apache-2.0"
    assert "Apache License" in (VSCODE / "LICENSE").read_text()
    ignored = (VSCODE / ".vscodeignore").read_text().split()
    assert "node_modules/**" in ignored and package["main"] == "./dist/extension.js"
    assert "esbuild" in package["scripts"]["bundle"] and "vscode:prepublish" in package["scripts"]


def _scopes(line: str) -> dict[str, str]:
    """text -> scope for the captures of the grammar's `typed` rule on line (Python's re reads
    this pattern as Oniguruma does)."""
    grammar = json.loads((VSCODE / "syntaxes" / "ngrules.tmLanguage.json").read_text())
    typed = grammar["repository"]["typed"]
    assert {"include": "#typed"} in grammar["patterns"]
    found = re.search(typed["match"], line)
    if not found:
        return {}
    return {found.group(int(k)): v["name"] for k, v in typed["captures"].items()}


def test_the_grammar_marks_a_typed_variables_kind():
    scopes = _scopes("rule r: Sum(x: Flatten) => x")
    assert scopes["x"].startswith("variable.parameter")
    assert scopes["Flatten"].startswith("entity.name.type.kind")
    assert _scopes("    s: scalar * 2")["scalar"].startswith("entity.name.type.kind")
    assert _scopes("rule r: Sum(x) => x") == {}
