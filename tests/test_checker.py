"""The checker: one test per diagnostic (message and line:col), and the Rule objects it builds."""

import pytest

from ngrules.errors import NgrulesError, RuleErrors
from ngrules.lang.loader import load_rules, parse_rules
from ngrules.lang.syntax import Guard, Let, PNamed, POp, PVar


def errors(text: str, path: str = "c.rules") -> list[tuple[int, int, str]]:
    with pytest.raises(RuleErrors) as info:
        parse_rules(text, path)
    return [(e.span.line, e.span.col, e.message) for e in info.value.errors]


def only_error(text: str) -> tuple[int, int, str]:
    (found,) = errors(text)
    return found


def test_syntax_error_names_what_was_expected():
    assert only_error("rule r:\n    x if\n") == (
        3,
        1,
        "unexpected end of file; expected an expression",
    )


def test_unknown_op_suggests_a_name():
    assert only_error("rule r: Log(Exq(x)) => x") == (
        1,
        13,
        "unknown op 'Exq' (did you mean 'Exp'?)",
    )


def test_unknown_op_in_replacement():
    assert only_error("rule r: Exp(x) => Sqrtt(x)") == (
        1,
        19,
        "unknown op 'Sqrtt' (did you mean 'Sqrt'?)",
    )


def test_wrong_arity_in_pattern():
    assert only_error("rule r:\n  Dot(x, y, z) => x") == (2, 3, "Dot takes 2 arguments, got 3")


def test_wrong_arity_in_replacement():
    assert only_error("rule r: Exp(x) => Log(x, x)") == (1, 19, "Log takes 1 argument, got 2")


def test_optional_wrapper_on_non_unary_op():
    assert only_error("rule r: Add?(x) => x") == (
        1,
        9,
        "an optional wrapper needs an op of one argument; Add takes 2 arguments",
    )


def test_unknown_attribute_of_a_known_op():
    assert only_error("rule r: d @ Dot(x, y) if len(d.reduction_axis) > 0 => x") == (
        1,
        32,
        "Dot has no attribute 'reduction_axis' (did you mean 'reduction_axes'?)",
    )


def test_unknown_attribute_of_any_node():
    assert only_error("rule r: Exp(x) if x.axse == () => x") == (
        1,
        21,
        "unknown attribute 'axse' (did you mean 'axis' or 'axes'?)",
    )


def test_unknown_attribute_in_replacement_op():
    assert only_error("rule r: Exp(x) => Broadcast(x, axs=x.axes)") == (
        1,
        32,
        "Broadcast has no attribute 'axs' (did you mean 'axes'?)",
    )


def test_unknown_kind():
    assert only_error("rule r: Exp(x: scalr) => x") == (
        1,
        16,
        "unknown kind 'scalr' (did you mean 'scalar'?); a kind is an op or a trait",
    )


@pytest.mark.parametrize(
    "text, col",
    [
        pytest.param("rule r: Exp(x) if y > 0 => x", 19, id="guard"),
        pytest.param("rule r: Exp(x) let z = y => x", 24, id="let"),
        pytest.param("rule r: Exp(x) => Log(y)", 23, id="replacement"),
    ],
)
def test_variable_never_bound(text, col):
    assert only_error(text) == (
        1,
        col,
        "variable 'y' is never bound (bind it in the pattern or with let)",
    )


def test_variable_used_before_its_let():
    assert only_error("rule r: Exp(x) if u > 0 let u = 1 => x") == (
        1,
        19,
        "variable 'u' is used before its let (at c.rules:1:25)",
    )


def test_wildcard_cannot_be_used():
    assert only_error("rule r: Add(x, _) => _") == (
        1,
        22,
        "'_' is a wildcard: it binds nothing, so it cannot be used",
    )


def test_let_rebinding_a_pattern_variable():
    assert only_error("rule r: Exp(x) let x = 1 => x") == (
        1,
        16,
        "let 'x' rebinds a name already bound",
    )


def test_variable_typed_two_incompatible_ways():
    assert only_error("rule r: Add(x: Flatten, Exp(x: Broadcast)) => x") == (
        1,
        32,
        "variable 'x' is typed two incompatible ways: Flatten (at c.rules:1:13) and Broadcast",
    )


def test_compatible_types_are_fine():
    assert len(parse_rules("rule r: Add(x: Flatten, Exp(x: view)) => x")) == 1


def test_named_sub_pattern_cannot_be_typed():
    assert only_error("rule r: Add(h, h: scalar) where h = Exp(y) => h") == (
        1,
        16,
        "'h' names a sub-pattern, so it cannot also be typed",
    )


def test_duplicate_rule_name():
    assert only_error("rule r: Exp(x) => x\nrule r: Log(x) => x") == (
        2,
        6,
        "duplicate rule name 'r' (first defined at c.rules:1)",
    )


def test_rule_that_can_never_fire():
    text = "pass p\nrule first: x * 1 => x\nrule second: y * 1 => y\n"
    assert only_error(text) == (
        3,
        6,
        "rule 'second' can never fire: rule 'first' (c.rules:2) has the same pattern, "
        "no guard, and comes first in pass 'p'",
    )


def test_guarded_or_other_pass_rules_do_not_shadow():
    text = "rule a: x * 1 if x.rank > 0 => x\nrule b: x * 1 => x\npass other\nrule c: x * 1 => x\n"
    assert [r.name for r in parse_rules(text)] == ["a", "b", "c"]


def test_priority_decides_which_rule_comes_first():
    text = "rule a: x * 1 => x\nrule b priority 2: y * 1 => y\n"
    assert only_error(text) == (
        1,
        6,
        "rule 'a' can never fire: rule 'b' (c.rules:2) has the same pattern, no guard, and "
        "comes first in pass 'c'",
    )


def test_unknown_function():
    assert only_error("rule r: Exp(x) => broadcst(x, x.axes)") == (
        1,
        19,
        "unknown function 'broadcst' (did you mean 'broadcast'?)",
    )


def test_function_arity():
    assert only_error("rule r: Exp(x) => flatten_at(x)") == (
        1,
        19,
        "flatten_at takes 2 argument(s), got 1",
    )


def test_function_unknown_keyword():
    assert only_error("rule r: Exp(x) => sum(x, reduction=x.axes)") == (
        1,
        26,
        "sum has no argument 'reduction' (did you mean 'reduction_axes'?)",
    )


def test_unknown_pass_in_pipeline():
    assert only_error("pass fusion\nrule r: Exp(x) => x\npipeline cpu: fusoin") == (
        3,
        15,
        "unknown pass 'fusoin' in pipeline 'cpu' (did you mean 'fusion'?)",
    )


def test_pipeline_defined_twice():
    text = "pass p\npipeline cpu: p\npipeline cpu: p\n"
    assert only_error(text) == (3, 1, "pipeline 'cpu' is defined twice (first at c.rules:2:1)")


def test_import_cycle(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.rules").write_text('import "b.rules"\nrule a: Exp(x) => x\n')
    (tmp_path / "b.rules").write_text('rule b: Log(x) => x\nimport "a.rules"\n')
    with pytest.raises(RuleErrors) as info:
        load_rules("a.rules")
    (e,) = info.value.errors
    assert e.message == "import cycle: a.rules -> b.rules -> a.rules"
    assert (e.span.file, e.span.line, e.span.col) == ("b.rules", 2, 1)


def test_missing_import(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.rules").write_text('pass p\n  import "lib/missing.rules"\n')
    with pytest.raises(RuleErrors) as info:
        load_rules("a.rules")
    (e,) = info.value.errors
    assert e.message == "cannot import 'lib/missing.rules': there is no file lib/missing.rules"
    assert (e.span.file, e.span.line, e.span.col) == ("a.rules", 2, 3)


def test_sub_pattern_that_contains_itself():
    assert only_error("rule r: Add(h, y)\n  where h = Exp(h)\n  => y") == (
        2,
        3,
        "sub-pattern 'h' contains itself",
    )


def test_sub_pattern_defined_twice():
    assert only_error("rule r: Add(h @ Exp(x), y) where h = Log(y) => y") == (
        1,
        13,
        "sub-pattern 'h' is defined twice (first at c.rules:1:28)",
    )


def test_sub_pattern_never_used():
    assert only_error("rule r: Exp(x)\n  where h = Log(x)\n  => x") == (
        2,
        3,
        "sub-pattern 'h' is defined but never used in the pattern",
    )


def test_multi_root_replacement_count():
    assert only_error("rule r: Exp(x), Log(x) => (x, x, x)") == (
        1,
        28,
        "the rule has 2 root(s) but 3 replacements",
    )


def test_multi_root_needs_matching_outputs():
    text = "rule r: a @ Exp(x), b @ Log(x) => BatchnormFprop(x, x, x, eps=1)"
    assert only_error(text) == (1, 35, "the rule has 2 roots but BatchnormFprop has 3 output(s)")


def test_single_root_cannot_take_a_multi_output_op():
    assert only_error("rule r: Exp(x) => BatchnormFprop(x, x, x)") == (
        1,
        19,
        "BatchnormFprop has 3 outputs; pick one with [i]",
    )


def test_nesting_too_deep():
    text = "rule r: x => " + "Exp(" * 150 + "x" + ")" * 150
    line, col, message = only_error(text)
    assert (line, message) == (1, "nesting too deep (more than 100 levels)")
    assert col == 14 + 4 * 100  # the 101st Exp(


def test_pattern_too_large_once_expanded():
    wheres = "\n".join(f"  where h{i} = Add(h{i + 1}, h{i + 1})" for i in range(12))
    text = f"rule r: Exp(h0)\n{wheres}\n  where h12 = Exp(x)\n  => x"
    line, col, message = only_error(text)
    assert (line, col) == (1, 9)
    assert message.startswith("the pattern is too large once named sub-patterns are written out")


def test_file_that_is_not_utf8(tmp_path):
    (tmp_path / "bad.rules").write_bytes(b"rule r: x => x\n# caf\xe9\n")
    with pytest.raises(RuleErrors) as info:
        load_rules(tmp_path / "bad.rules")
    (e,) = info.value.errors
    assert (e.span.line, e.span.col) == (2, 6)
    assert e.message == "this file is not UTF-8 text (byte 0xe9)"


def test_missing_path_is_an_error(tmp_path):
    with pytest.raises(NgrulesError, match="no such rules file or folder"):
        load_rules(tmp_path / "nowhere.rules")


def test_every_error_is_reported_at_once(tmp_path):
    (tmp_path / "a.rules").write_text("rule r: Exq(x) => y\nrule s: Add(x) => x\n")
    (tmp_path / "b.rules").write_text("rule r: x => \n")
    with pytest.raises(RuleErrors) as info:
        load_rules(tmp_path)
    found = [(e.span.file.rsplit("/", 1)[-1], e.span.line, e.message) for e in info.value.errors]
    assert found == [
        ("a.rules", 1, "unknown op 'Exq' (did you mean 'Exp'?)"),
        ("a.rules", 1, "variable 'y' is never bound (bind it in the pattern or with let)"),
        ("a.rules", 2, "Add takes 2 arguments, got 1"),
        ("b.rules", 2, "unexpected end of file; expected an expression"),
    ]
    assert str(info.value).count(": error: ") == 4


# -- the Rule objects ------------------------------------------------------------------------
def test_named_sub_patterns_are_written_out_at_every_use():
    rules = parse_rules(
        "rule shared:\n  Add(Multiply(h, y), Multiply(h, z))\n  where h = Exp(x)\n"
        "  => Multiply(h, Add(y, z))"
    )
    h = PNamed("h", POp("Exp", (PVar("x"),)))
    (r,) = rules
    assert r.roots == (
        POp("Add", (POp("Multiply", (h, PVar("y"))), POp("Multiply", (h, PVar("z"))))),
    )


def test_at_names_are_written_out_at_later_bare_uses():
    (r,) = parse_rules("rule r: Add(e @ Exp(x), e) => e")
    e = PNamed("e", POp("Exp", (PVar("x"),)))
    assert r.roots == (POp("Add", (e, e)),)


def test_clauses_keep_guards_and_lets_in_order_without_wheres():
    (r,) = parse_rules(
        "rule r: Add(h, y)\n  let a = 1\n  where h = Exp(x)\n  if a > 0\n  let b = a\n  => y"
    )
    assert [type(c) for c in r.clauses] == [Let, Guard, Let]


def test_rule_metadata(tmp_path):
    (tmp_path / "lib.rules").write_text("pass shape\nrule l1: Exp(x) => x\n")
    (tmp_path / "main.rules").write_text(
        'import "lib.rules"\nrule m1: Log(x) => x\n\n# a comment\nrule m2 priority 5:\n'
        "  Sqrt(x) => x   # trailing\n\n# header of nothing\npipeline cpu: main, shape\n"
    )
    rules = load_rules(tmp_path / "main.rules")
    assert [(r.name, r.pass_name, r.order, r.priority) for r in rules] == [
        ("l1", "shape", 0, 0),
        ("m1", "main", 1, 0),
        ("m2", "main", 2, 5),
    ]
    assert [r.name for r in rules.passes["main"]] == ["m2", "m1"]
    assert rules.pipelines == {"cpu": ("main", "shape")}
    assert rules.rule("m2").source == "rule m2 priority 5:\n  Sqrt(x) => x   # trailing"
    assert rules.rule("m1").location.endswith("main.rules:2")


def test_each_file_is_loaded_once(tmp_path):
    (tmp_path / "lib.rules").write_text("rule l1: Exp(x) => x\n")
    (tmp_path / "a.rules").write_text('import "lib.rules"\n')
    (tmp_path / "b.rules").write_text('import "lib.rules"\n')
    assert [r.name for r in load_rules(tmp_path)] == ["l1"]


def test_an_attribute_of_an_op_declared_again_under_another_name_is_known():
    """An editor checks unsaved text and takes its ops out again; the attribute an op has in
    the newer text is known even though the op table has as many ops as before."""
    from ngrules.lang.loader import check_text

    def text(attr: str) -> str:
        return (f"op Scaled(x, {attr}: float = 1.0) = x * {attr}\n"
                f"rule r: Exp(y) if y.{attr} > 0 => y\n")

    assert check_text(text("alpha"), "e.rules")[1] == []
    assert check_text(text("beta"), "e.rules")[1] == []
