"""The editor on a user's own ops and rules (issue 38): completion offers the ops declared in
the document and the files it imports, with their parameters; hover on a rule name shows the
rule and its last verdict."""

import sys
import types

from ngrules.lsp import analysis
from ngrules.lsp.analysis import Document

OPS = "op UxLeaky(x, slope: float = 0.01) = Maximum(x, x * slope)\n"
TEXT = 'import "ops.rules"\nop UxSilu(x) = x * Sigmoid(x)\n\npass p\n' \
       "rule ux_silu: x * Sigmoid(x) => UxSilu(x)\nrule ux_leaky: Maximum(x, x * 0.2) => UxL\n"


def _doc(tmp_path, text=TEXT):
    (tmp_path / "ops.rules").write_text(OPS)
    return Document(text, str(tmp_path / "main.rules"))


def test_completion_offers_declared_ops_with_their_parameters(tmp_path):
    doc = _doc(tmp_path)
    last = doc.lines[5]
    found = {c[0]: c for c in doc.completions(5, len(last))}
    assert found["UxLeaky"] == ("UxLeaky", "op", "op UxLeaky(x, slope: float = 0.01)")
    assert "UxSilu" not in found  # the prefix is `UxL`
    silu = {c[0]: c for c in doc.completions(5, len(last) - 2)}  # prefix `U`
    assert silu["UxSilu"][2] == "op UxSilu(x)"


def test_inside_a_declared_ops_call_completion_offers_its_attributes(tmp_path):
    text = TEXT.replace("=> UxL\n", "=> UxLeaky(x, sl\n")
    doc = _doc(tmp_path, text)
    assert doc.completions(5, len(doc.lines[5])) == [
        ("slope=", "attribute", "slope: float = 0.01")]
    table = Document("pass p\nrule r: Exp(x) => Softmax(x, \n", "t.rules")
    assert any(c[0].endswith("=") for c in table.completions(1, len(table.lines[1])))


def test_hover_on_a_rule_name_shows_the_rule_and_not_verified_yet(tmp_path):
    doc = _doc(tmp_path)
    text = doc.hover(4, 7)  # `ux_silu` on its declaration line
    assert "rule ux_silu: x * Sigmoid(x) => UxSilu(x)" in text
    assert "main.rules:5" in text and "last verdict: not verified yet" in text


def test_hover_shows_the_cached_verdict_when_the_cache_has_one(tmp_path, monkeypatch):
    cache = types.ModuleType("ngrules.verification.cache")
    cache.last_verdict = lambda rule: f"verified      {rule.name} (40 ex.)" \
        if rule.name == "ux_silu" else None
    monkeypatch.setitem(sys.modules, "ngrules.verification.cache", cache)
    doc = _doc(tmp_path)
    assert "last verdict: verified      ux_silu (40 ex.)" in doc.hover(4, 7)
    assert "last verdict: not verified yet" in doc.hover(5, 7)
    cache.last_verdict = lambda rule: 1 / 0  # a broken cache: hover still answers
    assert analysis.last_verdict(doc._rule_named("ux_silu")) is None
