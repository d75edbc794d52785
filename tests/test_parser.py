"""The parser: text to rule AST, with spans, and syntax errors in words."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import lark
import pytest

import ngrules
from ngrules.errors import RuleSyntaxError
from ngrules.lang.parser import grammar_text, parse
from ngrules.lang.syntax import (
    EAttr,
    EBinary,
    EBool,
    ECall,
    EIndex,
    ENum,
    ESlice,
    EStr,
    ETuple,
    EUnary,
    EVar,
    Guard,
    Import,
    Let,
    PassDecl,
    PipelineDecl,
    PLit,
    PNamed,
    POp,
    PVar,
    RuleDecl,
    Where,
)

REPO = Path(__file__).resolve().parent.parent


def rule(text: str) -> RuleDecl:
    (decl,) = parse(text).decls
    return decl


def root(pattern_text: str):
    return rule(f"rule r: {pattern_text} => x").roots[0]


def expr(expr_text: str):
    return rule(f"rule r: x if {expr_text} => x").clauses[0].expr


X, Y = PVar("x"), PVar("y")


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("x", X, id="variable"),
        pytest.param("_", PVar("_"), id="wildcard"),
        pytest.param("x: Flatten", PVar("x", "Flatten"), id="typed"),
        pytest.param("0.5", PLit(0.5), id="literal"),
        pytest.param("-1", PLit(-1.0), id="negative-literal"),
        pytest.param("-x", POp("Negative", (X,)), id="negative"),
        pytest.param("-(1)", POp("Negative", (PLit(1.0),)), id="negative-of-literal"),
        pytest.param("-(-x)", POp("Negative", (POp("Negative", (X,)),)), id="double-negative"),
        pytest.param("Log(Exp(x))", POp("Log", (POp("Exp", (X,)),)), id="op"),
        pytest.param("Broadcast?(x)", POp("Broadcast", (X,), optional=True), id="optional"),
        pytest.param("d @ Dot(x, y)", PNamed("d", POp("Dot", (X, Y))), id="named"),
        pytest.param(
            "x + y * 2", POp("Add", (X, POp("Multiply", (Y, PLit(2.0))))), id="precedence"
        ),
        pytest.param(
            "x - y - 1", POp("Subtract", (POp("Subtract", (X, Y)), PLit(1.0))), id="left-assoc"
        ),
        pytest.param("x / -1", POp("Divide", (X, PLit(-1.0))), id="divide-by-negative"),
        pytest.param("n @ x * y", PNamed("n", POp("Multiply", (X, Y))), id="named-binds-loosest"),
        pytest.param("Placeholder()", POp("Placeholder", ()), id="no-arguments"),
    ],
)
def test_patterns(text, expected):
    assert root(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("1", ENum(1), id="int"),
        pytest.param("2.5e-3", ENum(0.0025), id="float"),
        pytest.param("-2", ENum(-2), id="negative-number"),
        pytest.param("-(2)", EUnary("-", ENum(2)), id="negate-number"),
        pytest.param('"a\\"b\\n"', EStr('a"b\n'), id="string-escapes"),
        pytest.param("true", EBool(True), id="true"),
        pytest.param("()", ETuple(()), id="empty-tuple"),
        pytest.param("(x,)", ETuple((EVar("x"),)), id="one-tuple"),
        pytest.param("x.axes.names", EAttr(EAttr(EVar("x"), "axes"), "names"), id="attributes"),
        pytest.param("t[1]", EIndex(EVar("t"), ENum(1)), id="index"),
        pytest.param("t[1:]", ESlice(EVar("t"), ENum(1), None), id="slice-from"),
        pytest.param("t[:2]", ESlice(EVar("t"), None, ENum(2)), id="slice-to"),
        pytest.param(
            "Dot(x, y, axes=())",
            ECall("Dot", (EVar("x"), EVar("y")), (("axes", ETuple(())),)),
            id="call-with-keyword",
        ),
        pytest.param(
            "a | b & c", EBinary("|", EVar("a"), EBinary("&", EVar("b"), EVar("c"))), id="axes-ops"
        ),
        pytest.param(
            "not a == b and c",
            EBinary("and", EUnary("not", EBinary("==", EVar("a"), EVar("b"))), EVar("c")),
            id="not-and",
        ),
        pytest.param(
            "a or b and c",
            EBinary("or", EVar("a"), EBinary("and", EVar("b"), EVar("c"))),
            id="or-and",
        ),
        pytest.param("a in b", EBinary("in", EVar("a"), EVar("b")), id="in"),
        pytest.param(
            "x.axes - r + r",
            EBinary("+", EBinary("-", EAttr(EVar("x"), "axes"), EVar("r")), EVar("r")),
            id="axes-algebra",
        ),
    ],
)
def test_expressions(text, expected):
    assert expr(text) == expected


def test_rule_with_every_clause():
    decl = rule(
        """rule r priority -3:
            d @ Dot(x, y), Sum(d)
            if len(d.axes) > 0
            let u = new_axis(1)
            where h = Exp(x)
            => (d, h)"""
    )
    assert decl.name == "r" and decl.priority == -3
    assert len(decl.roots) == 2
    assert [type(c) for c in decl.clauses] == [Guard, Let, Where]
    assert decl.replacement == (EVar("d"), EVar("h"))


def test_declarations():
    f = parse('import "lib/a.rules"\npass fusion\npipeline cpu: fusion, simplify\n', "f.rules")
    assert f.decls == (
        Import("lib/a.rules"),
        PassDecl("fusion"),
        PipelineDecl("cpu", ("fusion", "simplify")),
    )


def test_spans_point_at_source():
    f = parse("pass p\n\nrule mul_one:\n    x * Exp(y)  => x\n", "s.rules")
    decl = f.decls[1]
    assert (decl.span.line, decl.span.col) == (3, 1)
    assert (decl.name_span.line, decl.name_span.col) == (3, 6)
    mul = decl.roots[0]
    exp = mul.args[1]
    assert (exp.span.file, exp.span.line, exp.span.col) == ("s.rules", 4, 9)
    assert exp.span.source_line == "    x * Exp(y)  => x"


def test_comments_and_layout_are_free():
    assert parse("# c\nrule r: x # c\n => # c\n x").decls == parse("rule r: x => x").decls


@pytest.mark.parametrize(
    "text, message, where",
    [
        pytest.param("rule r:", "unexpected end of file; expected a pattern", (1, 8), id="eof"),
        pytest.param(
            "rule r: x if => y", "unexpected '=>'; expected an expression", (1, 14), id="guard"
        ),
        pytest.param(
            "rule r: Dot(x y) => x",
            "unexpected name 'y'; expected ':', ',', ')', '(', '?' or an operator",
            (1, 15),
            id="missing-comma",
        ),
        pytest.param(
            "rule if: x => x", "unexpected keyword 'if'; expected a name", (1, 6), id="keyword"
        ),
        pytest.param("rule r: x => $", "unexpected character '$'", (1, 14), id="character"),
        pytest.param(
            "rule r priority 1.5: x => x",
            "a priority must be a whole number",
            (1, 17),
            id="priority",
        ),
        pytest.param(
            "rule r: x => f(k=1, x)",
            "a positional argument follows a keyword argument",
            (1, 21),
            id="positional-after-keyword",
        ),
        pytest.param("rule r: x => 1e999", "the number 1e999 is too large", (1, 14), id="inf"),
        pytest.param(
            "rule r: x if a == b == c => x",
            "comparisons do not chain; add parentheses",
            (1, 21),
            id="chained-comparison",
        ),
        pytest.param(
            "rule r: x if a == not b => x",
            "'not' cannot follow '=='; add parentheses",
            (1, 19),
            id="not-after-comparison",
        ),
    ],
)
def test_syntax_errors_in_words(text, message, where):
    with pytest.raises(RuleSyntaxError) as info:
        parse(text, "e.rules")
    assert info.value.message.startswith(message)
    assert (info.value.span.line, info.value.span.col) == where
    assert str(info.value).startswith(f"e.rules:{where[0]}:{where[1]}: error: ")


def test_error_renders_caret():
    with pytest.raises(RuleSyntaxError) as info:
        parse("rule r: x => $", "e.rules")
    assert str(info.value).splitlines()[1:] == ["    rule r: x => $", "                 ^"]


def test_grammar_is_lalr_without_conflicts():
    lark.Lark(grammar_text(), parser="lalr", lexer="basic", strict=True)


def test_op_names_are_not_keywords():
    # an op the grammar has never heard of parses like any other
    assert root("MyFusedKernel(x, y)") == POp("MyFusedKernel", (X, Y))


def test_grammar_loads_from_an_installed_layout(tmp_path):
    """The wheel puts grammar/ inside the package; the parser must find it there."""
    pkg = tmp_path / "ngrules"
    shutil.copytree(REPO / "ngrules", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (pkg / "grammar").mkdir()
    marker = "// installed-copy-marker\n"
    text = marker + (REPO / "grammar" / "ngrules.lark").read_text()
    (pkg / "grammar" / "ngrules.lark").write_text(text)
    code = (
        "import ngrules.lang.parser as p; assert 'installed-copy-marker' in p.grammar_text(); "
        "print(p.parse('rule r: x => x').decls[0].name)"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "r"
    assert ngrules.lang.parser.grammar_text() == (REPO / "grammar" / "ngrules.lark").read_text()
