"""The language server's answers for a document being typed: recovery from syntax errors,
declared ops, keywords, library imports, completion by the bound op, nested symbols."""

from __future__ import annotations

import os

from ngrules.lang.shipped import library_path
from ngrules.lsp.analysis import Document
from ngrules.lsp.recovery import pieces

UNFINISHED = """pass p
rule a: x * 1 =>
rule b: Foo(x) => x
rule c: x + 0 => x
rule d: (x
"""


def test_one_syntax_error_hides_nothing_else():
    problems = Document(UNFINISHED, "t.rules").diagnostics()
    lines = sorted((d.place.line, d.message.split(";")[0]) for d in problems)
    assert [line for line, _ in lines] == [1, 2, 5]
    assert "unknown op 'Foo'" in dict(lines)[2]


def test_the_declarations_that_parse_still_answer():
    doc = Document(UNFINISHED, "t.rules")
    assert [s.name for s in doc.symbols()] == ["p", "b", "c"]
    assert doc.definition(3, 8) is not None  # x in rule c: its binding


def test_pieces_start_at_declarations():
    lines = ["# head", "pass p", "rule a:", "  x => x", "pipeline q: p"]
    assert pieces(lines) == [(0, 1), (1, 2), (2, 4), (4, 5)]


OPS = """op Silu(x) = x * Sigmoid(x)
pass fuse
rule silu:
    y @ x * Sigmoid(x)
    where s = Sigmoid(x)
    if len(y.axes) > 0
    => Silu(x)
"""


def test_a_declared_op_has_hover_and_a_definition():
    doc = Document(OPS, "t.rules")
    col = OPS.split("\n")[6].index("Silu")
    assert "op Silu(x) = x * Sigmoid(x)" in doc.hover(6, col)
    place = doc.definition(6, col)
    assert (place.line, place.col, place.end_col) == (0, 3, 7)


def test_where_is_a_keyword_where_it_is_one_and_a_function_where_called():
    doc = Document(OPS, "t.rules")
    assert "named sub-pattern" in doc.hover(4, 5)
    called = Document("pass p\nrule r: x => where(x > 0, x, x)\n", "u.rules")
    assert "where(" in called.hover(1, 14) and "sub-pattern" not in called.hover(1, 14)
    assert "guard" in doc.hover(5, 4)


def test_a_library_import_has_a_definition(tmp_path):
    text = 'import "ngrules:simplify.rules"\npass mine\nrule r: Exp(Log(a)) => a\n'
    place = Document(text, str(tmp_path / "m.rules")).definition(0, 12)
    assert place is not None
    assert os.path.samefile(place.path, library_path() / "simplify.rules")


def test_completion_after_a_dot_lists_the_bound_ops_attributes():
    text = "pass p\nrule r:\n    d @ Dot(x, y)\n    if d.\n    => d\n"
    doc = Document(text, "t.rules")
    labels = {c[0] for c in doc.completions(3, 9)}
    assert "reduction_axes" in labels and "axes" in labels
    assert "normalization_axes" not in labels and "slope" not in labels
    loose = {c[0] for c in doc.completions(3, 9)} | {
        c[0] for c in Document("pass p\nrule r: x if x.\n", "u.rules").completions(1, 16)
    }
    assert "slope" in loose  # an unbound kind offers every attribute


def test_symbols_nest_rules_under_their_pass():
    text = "pass a\nrule r1: x * 1 => x\nrule r2: x + 0 => x\npass b\nrule r3: -(-x) => x\n"
    tree = Document(text, "t.rules").symbol_tree()
    assert [(s.name, [c.name for c in s.children]) for s in tree] == [
        ("a", ["r1", "r2"]), ("b", ["r3"])]
