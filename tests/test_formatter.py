"""The formatter: canonical text with minimal parentheses, and parse(format(f)) == f."""

import pytest

from ngrules.errors import NgrulesError
from ngrules.lang.formatter import format_expr, format_pattern
from ngrules.lang.layout import format_rules
from ngrules.lang.parser import parse
from ngrules.lang.syntax import EBinary, ENum, EUnary, EVar, PLit, POp, PVar, RuleDecl, RulesFile


def canonical(text: str) -> str:
    return format_rules(parse(text))


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("rule r:(x*1)=>(x)", "rule r: x * 1 => x", id="drops-parens"),
        pytest.param("rule r: Add(x, Multiply(y, z)) => x", "rule r: x + y * z => x", id="infix"),
        pytest.param(
            "rule r: Multiply(Add(x, y), z) => x",
            "rule r: (x + y) * z => x",
            id="keeps-needed-parens",
        ),
        pytest.param(
            "rule r: Subtract(x, Subtract(y, z)) => x",
            "rule r: x - (y - z) => x",
            id="right-operand",
        ),
        pytest.param("rule r: Negative(Negative(x)) => x", "rule r: -(-x) => x", id="negatives"),
        pytest.param("rule r: Negative(1) => x", "rule r: -(1) => x", id="negate-literal"),
        pytest.param("rule r: x * -1.0 => x", "rule r: x * -1 => x", id="negative-literal"),
        pytest.param(
            "rule r: Multiply(n @ Exp(x), y) => n",
            "rule r: (n @ Exp(x)) * y => n",
            id="named-operand",
        ),
        pytest.param(
            "rule r: x if not (a == b) => (x)",
            "rule r:\n    x\n    if not a == b\n    => x",
            id="clauses-on-lines",
        ),
        pytest.param("rule r: x => (a, b)", "rule r: x => (a, b)", id="multi-replacement"),
        pytest.param("rule r: x => ((a, b),)", "rule r: x => ((a, b),)", id="tuple-replacement"),
        pytest.param("rule r: x => (-(1)).y", "rule r: x => (-(1)).y", id="postfix-on-unary"),
        pytest.param("rule r priority 0: x => x", "rule r priority 0: x => x", id="priority"),
    ],
)
def test_canonical_text(text, expected):
    assert canonical(text) == expected + "\n"


def test_file_layout():
    text = 'import "a.rules"\npass p\nrule a: x => x\nrule b: x if x => x\npipeline c: p\n'
    assert canonical(text) == (
        'import "a.rules"\n\npass p\nrule a: x => x\n\nrule b:\n    x\n    if x\n    => x\n\n'
        "pipeline c: p\n"
    )


@pytest.mark.parametrize(
    "node, expected",
    [
        pytest.param(POp("Add", (PLit(-2.0), PVar("x", "scalar"))), "-2 + x: scalar", id="p1"),
        pytest.param(POp("Exp", (PVar("x"),), optional=True), "Exp?(x)", id="p2"),
    ],
)
def test_format_pattern(node, expected):
    assert format_pattern(node) == expected


@pytest.mark.parametrize(
    "node, expected",
    [
        pytest.param(
            EBinary("==", EBinary("==", EVar("a"), EVar("b")), EVar("c")),
            "(a == b) == c",
            id="comparisons-do-not-chain",
        ),
        pytest.param(EUnary("-", ENum(-1)), "-(-1)", id="negate-negative"),
        pytest.param(
            EBinary("*", ENum(2.5), ENum(10**20)), "2.5 * 100000000000000000000", id="numbers"
        ),
    ],
)
def test_format_expr(node, expected):
    assert format_expr(node) == expected


def test_round_trip_of_a_realistic_file():
    text = """
    pass dot_lowering
    rule dot_matrix_vector priority 2:
        d @ Dot(x, y)
        let r = d.reduction_axes
        let xm = flatten_at(axes_with_order(x, (x.axes - r) + r), len(x.axes) - len(r))
        if len(xm.axes) == 1 and not is_scalar(y) or "s" in x.axes.names[1:]
        => axes_with_order(unflatten(DotLowDimension(xm, y, axes=xm.axes[0])), d.axes)
    """
    f = parse(text)
    assert parse(format_rules(f)) == f
    assert format_rules(parse(format_rules(f))) == format_rules(f)


def test_too_deep_ast_is_an_error_not_a_crash():
    p = PVar("x")
    for _ in range(5000):
        p = POp("Exp", (p,))
    f = RulesFile("f", (RuleDecl("r", (p,), (), (EVar("x"),)),))
    with pytest.raises(NgrulesError, match="nesting too deep"):
        format_rules(f)


def test_comments_and_blank_lines_survive_formatting():
    text = (
        "# header\n\npass p\n\n# about r\nrule r: x * 1 => x  # identity\n\n"
        "rule s:   # guarded\n    Exp(x)\n    if x.rank == 1   # rank one\n    => x\n# the end\n"
    )
    out = canonical(text)
    assert out == (
        "# header\n\npass p\n\n# about r\nrule r: x * 1 => x  # identity\n\n"
        "rule s:  # guarded\n    Exp(x)\n    if x.rank == 1  # rank one\n    => x\n\n# the end\n"
    )
    assert canonical(out) == out


def test_a_comment_line_inside_a_rule_stays_before_its_clause():
    text = (
        "rule s:\n    Exp(x)\n    # why the rank\n    if x.rank == 1\n\n"
        "    if x.rank > 0  # second\n    # then\n    => x  # last\n"
    )
    out = canonical(text)
    assert out == (
        "rule s:\n    Exp(x)\n    # why the rank\n    if x.rank == 1\n"
        "    if x.rank > 0  # second\n    # then\n    => x  # last\n"
    )
    assert canonical(out) == out


@pytest.mark.parametrize(
    "text, expected",
    [
        ("rule s:\n    # why\n    Exp(x) => x\n", "rule s:\n    # why\n    Exp(x)\n    => x\n"),
        ("rule s:\n    Exp(x)\n    # then\n    => x\n",) * 2,
    ],
)
def test_a_rule_with_a_comment_line_inside_is_not_joined_onto_one_line(text, expected):
    """Joined, the comment would land after the rule (and move again at the next fmt)."""
    out = canonical(text)
    assert out == expected
    assert canonical(out) == out


def test_a_hash_inside_a_string_is_not_a_comment():
    out = canonical('import "a#b.rules"  # real\n')
    assert out == 'import "a#b.rules"  # real\n'


def test_one_line_rules_form_an_aligned_table():
    out = canonical("rule a: x * 1 => x # one\nrule long_name: Log(Exp(a)) => a # two\n")
    assert out == (
        "rule a:         x * 1       => x  # one\n"
        "rule long_name: Log(Exp(a)) => a  # two\n"
    )


def test_multi_root_rules_put_each_root_on_its_own_line():
    out = canonical("rule m: s @ Sum(x), t @ Max(x) => (s, t)\n")
    assert out == "rule m:\n    s @ Sum(x),\n    t @ Max(x)\n    => (s, t)\n"


def test_the_rule_library_is_canonically_formatted():
    from ngrules.lang.library import library_path

    for path in sorted(library_path().glob("*.rules")):
        text = path.read_text(encoding="utf-8")
        assert canonical(text) == text, f"{path.name} is not in canonical form (ngrules fmt)"


def test_long_rules_break_over_lines_within_100_columns():
    pattern = " + ".join(f"Exp(variable_number_{i})" for i in range(8))
    out = canonical(f"rule long: {pattern} => variable_number_0  # a comment\n")
    assert out.startswith("rule long:  # a comment\n    Exp(variable_number_0) + ")
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "\n        + Exp(" in out and canonical(out) == out
