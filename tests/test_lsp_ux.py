"""The editor on a user's own ops and rules (issue 38): completion offers the ops declared in
the document and the files it imports, with their parameters; hover on a rule name shows the
rule and its last verdict."""

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


def test_hover_shows_the_last_verdict_from_the_verdict_cache(tmp_path, monkeypatch):
    """A rule verified (its verdict kept in the cache, a folder of this test's own) shows
    that verdict on hover; one not verified, or a cache that breaks, says so."""
    import ngrules as ng
    from ngrules.verification import cache

    text = TEXT.replace("=> UxL\n", "=> UxLeaky(x, slope=0.2)\n")
    doc = _doc(tmp_path, text)
    (tmp_path / "main.rules").write_text(text)
    assert "last verdict: not verified yet" in doc.hover(4, 7)
    report = ng.verify(str(tmp_path / "main.rules"), only=["ux_silu"], examples=5, seed=1)
    assert [v.status for v in report.verdicts] == ["verified"]
    assert f"last verdict: {report.verdicts[0].headline}" in doc.hover(4, 7)
    assert "last verdict: not verified yet" in doc.hover(5, 7)  # ux_leaky: never verified
    monkeypatch.setattr(cache, "last_verdict", lambda *a, **k: 1 / 0)
    assert "last verdict: not verified yet" in doc.hover(4, 7)  # a broken cache: still answers
