"""Highlighting: the Pygments lexer (by entry point), coloured CLI snippets, the editor files."""

import json
import os
import pty
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ngrules.lang.parser import KEYWORDS

pygments = pytest.importorskip("pygments")
from pygments import lex  # noqa: E402
from pygments.lexers import get_lexer_by_name, get_lexer_for_filename  # noqa: E402
from pygments.token import Error, Keyword, Name  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VSCODE = ROOT / "editors" / "vscode"


def fenced(language: str):
    """Every ```language block of the README and docs/ (text, file)."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for m in re.finditer(rf"^```{language}\n(.*?)^```", path.read_text(), re.M | re.S):
            yield m.group(1), path.name


def test_the_lexer_is_found_by_name_and_file_name_through_the_entry_point():
    assert get_lexer_by_name("ngrules").name == "ngrules"
    assert get_lexer_for_filename("dot.rules").name == "ngrules"


def test_the_library_and_every_docs_example_lex_without_errors():
    lexer = get_lexer_by_name("ngrules")
    texts = [(p.read_text(), p.name) for p in sorted((ROOT / "rules").glob("*.rules"))]
    texts += list(fenced("ngrules"))
    assert len(texts) > 8
    for text, where in texts:
        bad = [v for t, v in lex(text, lexer) if t is Error]
        assert not bad, (where, bad)


def test_tokens_are_classified():
    tokens = list(lex("rule r: d @ Dot(x, y) if d.rank > 0 => broadcast(x, y.axes)",
                      get_lexer_by_name("ngrules")))
    kinds = {v: t for t, v in tokens}
    assert kinds["rule"] in Keyword and kinds["if"] in Keyword
    assert kinds["Dot"] is Name.Class and kinds["broadcast"] is Name.Builtin
    assert kinds["rank"] is Name.Attribute and kinds["r"] is Name.Function


def check_on(tmp_path, terminal: bool) -> str:
    (tmp_path / "bad.rules").write_text("rule r: Mul(x, 1) => x\n")
    cmd = [shutil.which("ngrules"), "check", "bad.rules"]
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    if not terminal:
        return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, env=env).stderr
    leader, follower = pty.openpty()
    subprocess.run(cmd, cwd=tmp_path, stderr=follower, stdout=subprocess.DEVNULL, env=env,
                   timeout=60)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return out.decode()


def test_error_snippets_are_coloured_on_a_terminal_only(tmp_path):
    coloured = check_on(tmp_path, terminal=True)
    plain = check_on(tmp_path, terminal=False)
    assert "\x1b[" in coloured and "\x1b[" not in plain
    strip = re.sub(r"\x1b\[[0-9;]*m", "", coloured).replace("\r\n", "\n")
    assert strip == plain, (strip, plain)
    assert "unknown op 'Mul'" in plain and "            ^^^" in plain


def test_the_vscode_extension_declares_the_language_grammar_and_server():
    package = json.loads((VSCODE / "package.json").read_text())
    [language] = package["contributes"]["languages"]
    assert language["extensions"] == [".rules"]
    assert json.loads((VSCODE / language["configuration"]).read_text())["comments"] == {
        "lineComment": "#"}
    [grammar] = package["contributes"]["grammars"]
    assert (VSCODE / grammar["path"]).is_file()
    assert package["contributes"]["configuration"]["properties"]["ngrules.command"][
        "default"] == ["ngrules", "lsp"]
    assert package["main"] == "./dist/extension.js"  # the bundle `npm run bundle` builds
    assert "extension.js" in package["scripts"]["bundle"]
    assert "LanguageClient" in (VSCODE / "extension.js").read_text()


def test_the_textmate_grammar_knows_every_keyword_and_its_patterns_compile():
    grammar = json.loads((VSCODE / "syntaxes" / "ngrules.tmLanguage.json").read_text())
    repo = grammar["repository"]
    assert {p["include"][1:] for p in grammar["patterns"]} == set(repo)
    for rule in repo.values():
        re.compile(rule["match"])  # the patterns use only syntax Python and Oniguruma share
    words = set(re.findall(r"[a-z]+", repo["keyword"]["match"] + repo["declaration"]["match"]))
    assert words >= KEYWORDS, KEYWORDS - words
    library = (ROOT / "rules" / "dot.rules").read_text()
    assert re.search(repo["op"]["match"], library).group() == "Dot"
