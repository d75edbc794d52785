"""Properties of the language: formatting round-trips, and no input crashes the loader."""

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ngrules.errors import NgrulesError, RuleErrors
from ngrules.lang.layout import format_rules
from ngrules.lang.loader import load_rules, parse_rules
from ngrules.lang.parser import KEYWORDS, parse
from ngrules.lang.syntax import (
    Assume,
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
    RulesFile,
    Where,
)

# -- strategies for rule ASTs ----------------------------------------------------------------
names = st.from_regex(r"[a-z_][a-z0-9_]{0,4}", fullmatch=True).filter(lambda s: s not in KEYWORDS)
op_names = st.sampled_from(
    ["Add", "Subtract", "Multiply", "Divide", "Negative", "Exp", "Dot", "Op"]
)
numbers = st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(10**6), 10**6)

pattern_leaves = st.one_of(
    st.builds(PVar, names),
    st.builds(PVar, names, st.sampled_from(["scalar", "Flatten", "view"])),
    st.builds(PLit, st.floats(allow_nan=False, allow_infinity=False)),
)


def _pattern_nodes(children):
    return st.one_of(
        st.builds(POp, op_names, st.lists(children, max_size=3).map(tuple)),
        st.builds(POp, op_names, st.tuples(children), st.just(True)),
        st.builds(PNamed, names, children),
    )


patterns = st.recursive(pattern_leaves, _pattern_nodes, max_leaves=8)

expr_leaves = st.one_of(
    st.builds(ENum, numbers),
    st.builds(EStr, st.text(st.characters(blacklist_categories=("Cs",)), max_size=5)),
    st.builds(EBool, st.booleans()),
    st.builds(EVar, names),
)
binary_ops = st.sampled_from(
    ["+", "-", "*", "/", "|", "&", "==", "!=", "<", "<=", ">", ">=", "in", "and", "or"]
)


def _kwargs(children):
    return st.dictionaries(names, children, max_size=2).map(lambda d: tuple(d.items()))


def _expr_nodes(children):
    maybe = st.none() | children
    return st.one_of(
        st.builds(EAttr, children, names),
        st.builds(EIndex, children, children),
        st.builds(ESlice, children, maybe, maybe),
        st.builds(
            ECall, names | op_names, st.lists(children, max_size=3).map(tuple), _kwargs(children)
        ),
        st.builds(EBinary, binary_ops, children, children),
        st.builds(EUnary, st.sampled_from(["-", "not"]), children),
        st.builds(ETuple, st.lists(children, max_size=3).map(tuple)),
    )


exprs = st.recursive(expr_leaves, _expr_nodes, max_leaves=8)
clauses = st.one_of(
    st.builds(Guard, exprs),
    st.builds(Let, names, exprs),
    st.builds(Where, names, patterns),
    st.builds(Assume, exprs),
)
rules = st.builds(
    RuleDecl,
    names,
    st.lists(patterns, min_size=1, max_size=3).map(tuple),
    st.lists(clauses, max_size=3).map(tuple),
    st.lists(exprs, max_size=3).map(tuple),
    st.none() | st.integers(-100, 100),
)
decls = st.one_of(
    rules,
    st.builds(PassDecl, names),
    st.builds(PipelineDecl, names, st.lists(names, min_size=1, max_size=3).map(tuple)),
    st.builds(Import, st.text(string.printable, max_size=8)),
)
files = st.builds(RulesFile, st.just("gen.rules"), st.lists(decls, max_size=5).map(tuple))


@given(files)
def test_format_then_parse_gives_the_same_ast(f):
    assert parse(format_rules(f), f.path) == f


@given(files)
def test_formatting_is_idempotent(f):
    text = format_rules(f)
    assert format_rules(parse(text, f.path)) == text


# -- no input crashes the loader -------------------------------------------------------------
SAMPLE = """\
pass simplify
rule mul_one: x * 1 => x
rule dot_outer priority 2:
    d @ Dot(x, y)
    if len(d.reduction_axes) == 0 and not is_scalar(x)
    let u = new_axis(1)
    where h = Broadcast?(Exp(x: scalar))
    => Dot(broadcast(x, x.axes + u), broadcast(y, u + y.axes))
pipeline cpu: simplify
"""


def assert_located(text: str) -> None:
    """Loading text either works or raises NgrulesErrors that each carry a span."""
    try:
        parse_rules(text, "fuzz.rules")
    except RuleErrors as e:
        assert e.errors and all(err.span is not None for err in e.errors)
        assert str(e)
    except NgrulesError as e:  # pragma: no cover - the loader always wraps in RuleErrors
        assert e.span is not None


@given(st.text(alphabet=string.printable + "@?=>()", max_size=200))
def test_random_text_raises_only_located_errors(text):
    assert_located(text)


@given(st.data())
def test_mutated_rules_raise_only_located_errors(data):
    text = SAMPLE
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text)))
        j = data.draw(st.integers(i, min(len(text), i + 10)))
        insert = data.draw(st.text(alphabet=string.printable + "@?=>", max_size=5))
        text = text[:i] + insert + text[j:]
    assert_located(text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("rule r: " + "(" * 10_000 + "x" + ")" * 10_000 + " => x", id="parens"),
        pytest.param("rule r: x => " + "(" * 10_000 + "x" + ")" * 10_000, id="expr-parens"),
        pytest.param("rule r: " + "-(" * 10_000 + "x" + ")" * 10_000 + " => x", id="negations"),
        pytest.param("rule r: x => " + "f(" * 10_000 + "x" + ")" * 10_000, id="calls"),
        pytest.param("rule r: x => " + "not " * 10_000 + "x", id="nots"),
        pytest.param("rule r: x => " + "x." + "a." * 10_000 + "b", id="attributes"),
        pytest.param("rule r: x => " + "+".join(["x"] * 50_000), id="long-sum"),
        pytest.param("rule r: " + "x" * 1_000_000 + " => x", id="megabyte-name"),
        pytest.param("# " + "junk" * 250_000 + "\nrule r: x => x", id="megabyte-comment"),
        pytest.param("rule r: x => " + "x ~" * 350_000, id="megabyte-line-of-junk"),
        pytest.param("\x00\x01\x02rule", id="control-characters"),
        pytest.param("rule r: x => 9" + "9" * 5000, id="huge-number"),
    ],
)
def test_hostile_inputs(text):
    assert_located(text)


def test_empty_file_loads_no_rules():
    assert len(parse_rules("")) == 0


def test_binary_junk_file(tmp_path):
    (tmp_path / "junk.rules").write_bytes(bytes(range(256)) * 64)
    with pytest.raises(RuleErrors) as info:
        load_rules(tmp_path / "junk.rules")
    assert all(e.span is not None for e in info.value.errors)


def test_deep_nesting_is_located():
    with pytest.raises(RuleErrors) as info:
        parse_rules("rule r: " + "(" * 10_000 + "Exp(" * 200 + "x" + ")" * 10_200 + " => x")
    (e,) = info.value.errors
    assert e.message == "nesting too deep (more than 100 levels)"
    assert (e.span.line, e.span.col) == (1, 9 + 100)  # the first bracket 101 deep
