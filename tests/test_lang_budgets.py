"""Issue 37's language faults: limits that applied to one step (one tuple, one declaration, one
binary operator, one import) now apply to the whole (a value, each `op` line, real nesting, an
import chain), and what reorders text on screen is a located warning."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

import ngrules as ng
from ngrules.cli.main import main
from ngrules.engine.bindings import short
from ngrules.lang.bounds import MAX_ITEMS, shown, total_items
from ngrules.lang.functions import register_function
from ngrules.lang.loader import MAX_IMPORT_DEPTH, check_text
from ngrules.lang.parser import parse
from ngrules.lsp.analysis import Document

C = ng.make_axis(2, "C")
X = ng.placeholder([C], name="x")
ROOT = Path(__file__).resolve().parent.parent


# -- F16: each `op` line is a declaration of its own ---------------------------------------------
def test_nine_thousand_op_declarations_are_not_one_declaration_too_long():
    text = "\n".join(f"op Twice{i}(x) = x * 2" for i in range(9000))  # 188 kB
    assert len(parse(text, "ops.rules").decls) == 9000


def test_a_variable_named_op_does_not_start_a_declaration():
    text = "rule r: op @ Exp(x) if op.op == \"Exp\" => x"
    assert len(parse(text, "t.rules").decls) == 1


# -- F17: a chain of one operator is one level of nesting ----------------------------------------
@pytest.mark.parametrize("where", ["guard", "pattern", "replacement"])
def test_a_flat_sum_of_101_terms_is_accepted_and_runs(where):
    terms = 101
    if where == "guard":
        text = "rule r: Exp(x) if " + " + ".join(["1"] * terms) + f" == {terms} => x"
        graph, fired = ng.exp(X), {"r": 1}
    elif where == "pattern":
        text = "rule r: " + " + ".join(f"v{i}" for i in range(terms)) + " => v0"
        graph = X
        for i in range(1, terms):
            graph = ng.add(graph, ng.placeholder([C], name=f"p{i}"))
        fired = {"r": 1}
    else:
        text = "rule r: Exp(x) => Exp(x)" + " + x - x" * (terms // 2)  # one + and - chain
        graph, fired = ng.exp(X), {"r": 1}
    rules = ng.parse_rules(text, "chain.rules")
    assert ng.rewrite([graph], rules).fired() == fired


def test_a_chain_too_deep_for_the_generated_code_is_a_located_error():
    text = "rule r: Exp(x) => " + " + ".join(["x"] * 400)
    with pytest.raises(ng.RuleErrors, match="chains of operators nest more than") as err:
        ng.parse_rules(text, "chain.rules")
    assert err.value.errors[0].span.line == 1


def test_real_nesting_is_still_bounded():
    text = "rule r: x => " + "Exp(" * 150 + "x" + ")" * 150
    with pytest.raises(ng.RuleErrors, match=r"nesting too deep \(more than 100 levels\)"):
        ng.parse_rules(text, "deep.rules")


# -- F8, F9: the size of a value counts nested tuples whole; values shown are cut -----------------
def _doubling(name: str, leaf: str, k: int) -> list[str]:
    return [f"  let {name}0 = ({leaf},)"] + [
        f"  let {name}{i} = {name}{i - 1} + {name}{i - 1}" for i in range(1, k + 1)]


def _nested_guard(k: int) -> str:
    """Three levels of 2**k items each, compared with an equal value built apart (nothing in
    common for Python's identity shortcut): 2**(3k) comparisons inside one C call."""
    lines = [*_doubling("a", "0", k), *_doubling("b", f"a{k}", k), *_doubling("c", f"b{k}", k),
             f"  let e = a{k - 1} + a{k - 1}", *_doubling("f", "e", k), *_doubling("d", f"f{k}", k)]
    return "rule r: Exp(x)\n" + "\n".join(lines) + f"\n  if c{k} == d{k}\n  => x"


def test_nested_tuples_past_the_bound_are_refused_by_the_checker():
    with pytest.raises(ng.RuleErrors, match="at least 16,386 items, more than the 10,000") as e:
        ng.parse_rules(_nested_guard(13), "nested.rules")  # was 10+ minutes in `apply`
    first = e.value.errors[0]
    assert (first.span.line, first.span.col) == (17, 12)  # `b0 + b0`: 2 x (1 + 8,192)


def test_nested_tuples_within_the_bound_still_compare():
    rules = ng.parse_rules(_nested_guard(4), "nested.rules")  # 16 ** 3 = 4,096 items
    assert ng.rewrite([ng.exp(X)], rules).fired() == {"r": 1}


def test_a_tuple_literal_of_tuples_counts_them():
    text = f"rule r: Exp(x)\n  let t = ({', '.join(['0'] * 4000)})\n  if len((t, t, t)) == 3 => x"
    with pytest.raises(ng.RuleErrors, match="at least 12,003 items") as e:
        ng.parse_rules(text, "lit.rules")
    assert (e.value.errors[0].span.line, e.value.errors[0].span.col) == (3, 10)


def test_a_nested_value_known_only_when_computed_is_refused_then():
    leaf = (0,) * 8192
    deep = ((leaf,) * 8192,) * 8192  # 5.5e11 items, shared: minutes to compare
    register_function("deep_value_37", lambda x: deep, arity=1)
    rules = ng.parse_rules("rule r: Exp(x) if deep_value_37(x) == deep_value_37(x) => x", "d.rules")
    start = time.process_time()
    assert ng.rewrite([ng.exp(X)], rules).fired() == {}
    assert time.process_time() - start < 10
    why = str(ng.explain(rules.rules[0], [ng.exp(X)]))
    assert "more than 10000 items" in why and len(why) < 5000


def test_total_items_stops_counting_past_the_limit():
    leaf = (0,) * 8192
    deep = ((leaf,) * 8192,) * 8192  # 5.5e11 items, shared
    assert MAX_ITEMS < total_items(deep) <= MAX_ITEMS + 8192
    assert total_items(("ab", ("cd", 1))) == 2 + 2 + 2 + 2


class _Counted:
    calls = 0

    def __repr__(self) -> str:
        _Counted.calls += 1
        return "c"


def test_a_value_is_shown_without_reading_all_of_it():
    _Counted.calls = 0
    value = ((_Counted(),) * 1000,) * 1000  # a million reprs before
    text = short(value)
    assert len(text) <= 60 and _Counted.calls <= 64
    assert len(shown(tuple(range(100_000)))) <= 200


# -- F11: an import chain too deep is a located error, in check and in the editor ----------------
def _chain_of_imports(folder: Path, n: int) -> Path:
    for i in range(n):
        head = f'import "f{i + 1}.rules"\n' if i < n - 1 else ""
        (folder / f"f{i}.rules").write_text(head + f"pass p{i}\nrule r{i}: Exp(Log(x)) => x\n")
    return folder / "f0.rules"


def test_an_import_chain_400_files_deep_is_a_located_error(tmp_path):
    first = _chain_of_imports(tmp_path, 400)  # was a RecursionError
    with pytest.raises(ng.RuleErrors) as err:
        ng.load_rules(first)
    (e,) = [e for e in err.value.errors if "imports nest too deep" in e.message]
    assert e.span.file.endswith(f"f{MAX_IMPORT_DEPTH - 1}.rules") and e.span.line == 1
    files, errors = check_text(first.read_text(), str(first))
    assert any("imports nest too deep" in e.message for e in errors)
    shown_here = Document(first.read_text(), str(first)).diagnostics()
    assert any("imports nest too deep" in d.message and d.place.line == 0 for d in shown_here)


def test_an_import_chain_within_the_bound_loads(tmp_path):
    assert len(ng.load_rules(_chain_of_imports(tmp_path, 60))) == 60


# -- F18: the documented cost bounds are what the code does ---------------------------------------
def test_the_cost_bound_examples_in_the_docs_are_refused_as_the_docs_say():
    text = (ROOT / "docs" / "language.md").read_text()
    para = text[text.index("**Cost bounds.**"):]
    para = para[: para.index("\n\n")]
    assert "(0,) * 100000000" not in para
    rules = ng.parse_rules("rule r: Exp(x) if pow(10, 100000000) > 0 => x", "bounds.rules")
    assert "too large" in str(ng.explain(rules.rules[0], [ng.exp(X)]))  # when computed
    with pytest.raises(ng.RuleErrors, match="at least 12,000 items"):  # known from the text
        ng.parse_rules(f"rule s: Log(x)\n  let t = ({', '.join(['0'] * 6000)})\n"
                       "  if len(t + t) > 0 => x", "bounds.rules")
    with pytest.raises(ng.RuleErrors, match=r"a tuple \* a number is not defined"):
        ng.parse_rules("rule r: Exp(x) if len((0,) * 3) > 0 => x", "t.rules")


# -- F19: bidirectional controls are located warnings --------------------------------------------
BIDI = "pass p\n# admin \u202e }if is_admin{ \u2066\nrule r: Exp(Log(x)) => x\n"


def test_a_bidi_control_in_a_comment_is_a_warning_in_check(tmp_path, capsys):
    path = tmp_path / "b.rules"
    path.write_text(BIDI, encoding="utf-8")
    (w,) = ng.load_rules(path).warnings
    assert (w.span.line, w.span.col) == (2, 9) and "U+202E" in w.message
    assert main(["check", str(path)]) == 0
    err = capsys.readouterr().err
    assert re.search(r"b\.rules:2:9: warning: a bidirectional control character", err)


def test_a_bidi_control_is_a_warning_in_the_editor():
    found = Document(BIDI, "/tmp/b.rules").diagnostics()
    assert [(d.place.line, d.place.col, d.warning) for d in found] == [(1, 8, True)]
