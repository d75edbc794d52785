"""Fuzzing rules files (issue 11, acceptance): the shipped library's files, mutated token by
token and byte by byte, either load or raise `NgrulesError`s that each point into the text;
what loads then compiles and rewrites a small graph raising nothing but `NgrulesError`."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ngrules as ng
from ngrules.errors import NgrulesError, RuleErrors
from ngrules.lang.library import library_path

LIBRARY = {p.name: p.read_text() for p in sorted(library_path().glob("*.rules"))}
TOKEN = re.compile(r'"[^"\n]*"|#[^\n]*|\w+|=>|[^\s\w]|\s+')
VOCABULARY = [
    "(", ")", ",", "=>", "@", "?", ":", "[", "]", ".", "*", "+", "-", "/", "==", "\n", "#",
    "if", "let", "where", "assume", "rule", "pass", "pipeline", "import", "priority", "not", "and",
    "in",
    "Exp", "Add", "Broadcast?(", "Dot", "Prod", "Sum", "Constant", "scalar", "x", "_", "c",
    "0", "-1", "1e999", "9" * 400, "0.5", '"x.rules"', '"../../etc/passwd"', '"\\q"', '"\\',
    "pow(10, 100000000)", "(1,) * 100000000", "value(c)", "size(", "axes", "reduction_axes",
    "Exp(" * 120, ")" * 120, "\x00", "é", "\ufeff", "\\",
]

A, B = ng.make_axis(2, "A"), ng.make_axis(3, "B")
X, Y = ng.placeholder([A, B], name="x"), ng.placeholder([A, B], name="y")
GRAPH = [
    ng.log(ng.exp(X * 1.0 + 0.0)) - (-(-Y)),
    ng.dot(ng.placeholder([A], name="v"), X),
    ng.prod(ng.constant(2.0, [A, B]), out_axes=()),
    ng.sum(ng.constant(1.5, [A, B]), reduction_axes=[B]),
]


def _assert_located(err: NgrulesError) -> None:
    errors = err.errors if isinstance(err, RuleErrors) else [err]
    assert errors
    for e in errors:
        assert e.span is not None and e.span.line >= 1 and e.span.col >= 1, repr(e)
        assert str(e).startswith(f"{e.span.file}:{e.span.line}:{e.span.col}: ")


def _load_and_run(tmp_path, name: str, data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    try:
        rules = ng.load_rules(path)
    except NgrulesError as err:
        _assert_located(err)
        return
    try:
        ng.rewrite(GRAPH, rules, fuel=200)
    except NgrulesError as err:
        _assert_located(err)


@st.composite
def token_mutants(draw) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(LIBRARY)))
    tokens = TOKEN.findall(LIBRARY[name])
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(tokens) - 1))
        edit = draw(st.sampled_from(["delete", "insert", "replace", "duplicate", "swap"]))
        if edit == "delete":
            del tokens[i]
        elif edit == "duplicate":
            tokens[i:i] = tokens[i : i + draw(st.integers(1, 8))]
        elif edit == "swap":
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        else:
            token = draw(st.sampled_from(VOCABULARY))
            tokens[i : i + (edit == "replace")] = [" ", token, " "]
    return name, "".join(tokens).encode("utf-8")


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token_mutants())
def test_token_mutants_of_the_library_raise_only_located_errors(tmp_path, mutant):
    _load_and_run(tmp_path, *mutant)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(LIBRARY)), st.data())
def test_bit_flipped_and_truncated_library_files_raise_only_located_errors(
    tmp_path, name, data
):
    raw = bytearray(LIBRARY[name].encode("utf-8"))
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= 1 << data.draw(st.integers(0, 7))
    cut = data.draw(st.integers(0, len(raw)))
    _load_and_run(tmp_path, name, bytes(raw[: cut if data.draw(st.booleans()) else None]))


def test_the_unmutated_library_rewrites_the_graph_without_warnings():
    result = ng.rewrite(GRAPH, ng.load_rules(library_path()))
    assert {"log_exp", "mul_one", "add_zero", "neg_neg", "prod_const"} <= set(result.fired())
    assert not result.warnings
    rng = np.random.default_rng(0)
    leaves = [n for n in ng.toposort(GRAPH) if n.op == "Placeholder"]
    feeds = {n: rng.uniform(0.5, 2, n.axes.lengths).astype(np.float32) for n in leaves}
    for before, after in zip(ng.execute(GRAPH, feeds), ng.execute(result.outputs, feeds)):
        np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-6)
