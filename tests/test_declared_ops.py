"""Ops declared in `.rules` files: `op Silu(x) = x * Sigmoid(x)` and what it gives."""

import numpy as np
import pytest
from helpers import central_difference

import ngrules as ng
from ngrules.cli.main import main

pytestmark = pytest.mark.usefixtures("scratch_ops")

SILU = """\
op Silu(x) = x * Sigmoid(x)
pass fuse
rule silu: x * Sigmoid(x) => Silu(x)
"""


def _silu_graph():
    a, b = ng.make_axis(3, "A"), ng.make_axis(4, "B")
    x = ng.placeholder([a, b], name="x")
    return x, ng.tanh(x * ng.sigmoid(x)) + 1.0


def test_silu_rules_check_verify_and_apply_from_the_command_line(tmp_path, capsys):
    (tmp_path / "silu.rules").write_text(SILU)
    rules, graph, out = tmp_path / "silu.rules", tmp_path / "g.json", tmp_path / "out.json"
    x, y = _silu_graph()
    ng.save_graph(graph, [y])
    assert main(["check", str(rules)]) == 0
    assert main(["verify", str(rules), "--examples", "20"]) == 0
    assert main(["apply", str(graph), "-o", str(out), "--rules", str(rules)]) == 0
    printed = capsys.readouterr().out
    assert "1 declared op" in printed and "fired      1  silu" in printed
    (after,) = ng.load_graph(out)
    assert [n.op for n in ng.toposort([after])].count("Silu") == 1
    assert "Sigmoid" not in {n.op for n in ng.toposort([after])}
    xv = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    np.testing.assert_allclose(ng.execute([after], {"x": xv})[0], ng.execute([y], {x: xv})[0],
                               rtol=1e-6)
    # the rewritten file uses Silu: read again by any command that loads silu.rules first
    again = tmp_path / "again.json"
    assert main(["apply", str(out), "-o", str(again), "--rules", str(rules)]) == 0
    assert main(["check", str(rules), "--ops", str(rules)]) == 0


def test_a_declared_op_infers_axes_runs_its_body_and_differentiates():
    ng.parse_rules(SILU, "silu.rules")
    op = ng.OPS["Silu"]
    assert op.arity == 1 and op.has("elementwise") and op.has("fused")
    x = ng.placeholder({"A": 2, "B": 3}, np.float64, name="x")
    y = ng.make_node("Silu", (x,))
    assert (y.axes, y.dtype) == (x.axes, x.dtype)
    xv = np.random.default_rng(1).normal(size=(2, 3))
    np.testing.assert_allclose(ng.execute([y], {x: xv})[0], xv / (1 + np.exp(-xv)), rtol=1e-12)
    cost = ng.sum(y * y, out_axes=())
    (grad,) = ng.execute([ng.deriv(cost, x)], {x: xv})
    program = ng.compile_graph([cost])
    fd = central_difference(lambda v: program.run({x: v})[0].item(), xv)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


UNUSED = """\
op First(a, b) = Exp(a)
pass fold
rule first: First(x, y) => Exp(x)
"""


def test_a_parameter_the_body_does_not_use_runs_differentiates_and_verifies(tmp_path, capsys):
    """`op M(a, b) = a` once fed the unused `b` to the body's program: `verify` aborted the
    whole file (exit 2, no verdicts) and `run` failed."""
    ng.parse_rules(UNUSED, "unused.rules")
    x = ng.placeholder({"A": 3}, np.float64, name="x")
    y = ng.placeholder({"A": 3}, np.float64, name="y")
    node = ng.make_node("First", (x, y))
    xv, yv = np.linspace(-1, 1, 3), np.array([5.0, 6.0, 7.0])
    np.testing.assert_allclose(ng.execute([node], {x: xv, y: yv})[0], np.exp(xv), rtol=1e-12)
    cost = ng.sum(node, out_axes=())
    gx, gy = ng.execute([ng.deriv(cost, x), ng.deriv(cost, y)], {x: xv})  # y is not read
    np.testing.assert_allclose(gx, np.exp(xv), rtol=1e-12)
    np.testing.assert_array_equal(gy, np.zeros(3))
    (tmp_path / "unused.rules").write_text(UNUSED)
    assert main(["verify", str(tmp_path / "unused.rules"), "--examples", "10"]) == 0
    assert "verified      first" in capsys.readouterr().out
    ng.save_graph(tmp_path / "g.json", [node])
    np.save(tmp_path / "x.npy", xv)
    np.save(tmp_path / "y.npy", yv)
    assert main(["run", str(tmp_path / "g.json"), "--ops", str(tmp_path / "unused.rules"),
                 "--feed", f"x={tmp_path / 'x.npy'}", "--feed", f"y={tmp_path / 'y.npy'}"]) == 0
    assert "2.718" in capsys.readouterr().out


def test_attributes_defaults_and_several_outputs():
    rules = ng.parse_rules(
        """
        op Leaky(x, slope: float = 0.01) = Maximum(x, x * slope)
        op SumDiff(x, y) = (x + y, x - y)
        pass fuse
        rule leaky: Maximum(x, x * 0.2) => Leaky(x, slope=0.2)
        rule sum_diff: x + y, x - y => SumDiff(x, y)
        """,
        "t.rules",
    )
    assert rules.ops == ("Leaky", "SumDiff")
    assert ng.OPS["Leaky"].attr("slope").default == 0.01
    assert ng.OPS["SumDiff"].outputs == 2 and ng.OPS["SumDiff"].has("multi_output")
    report = ng.verify(rules, examples=20)
    assert report.ok, report
    x = ng.placeholder({"A": 4}, np.float64, name="x")
    y = ng.placeholder({"A": 4}, np.float64, name="y")
    xv, yv = np.array([-2.0, -0.5, 0.5, 2.0]), np.array([1.0, 2.0, 3.0, 4.0])
    (leaky,) = ng.execute([ng.make_node("Leaky", (x,))], {x: xv})
    np.testing.assert_allclose(leaky, np.where(xv > 0, xv, 0.01 * xv))
    s, d = ng.outputs_of(ng.make_node("SumDiff", (x, y)))
    np.testing.assert_allclose(ng.execute([s, d], {x: xv, y: yv}), [xv + yv, xv - yv])
    cost = ng.sum(s * d, out_axes=())  # = sum(x^2 - y^2)
    gx, gy = ng.execute([ng.deriv(cost, x), ng.deriv(cost, y)], {x: xv, y: yv})
    np.testing.assert_allclose(gx, 2 * xv)
    np.testing.assert_allclose(gy, -2 * yv)


def test_declared_ops_appear_in_patterns_like_built_ins():
    rules = ng.parse_rules(
        SILU + "pass unfuse\nrule unsilu: Silu(x) * 2 assume reals => 2 * x * Sigmoid(x)\n",
        "t.rules",  # over the reals: in IEEE, 2·x overflows where x·σ(x)·2 does not
    )
    report = ng.verify(rules.rule("unsilu"), examples=20)
    assert report.ok, report


def test_a_non_elementwise_body_gives_a_generic_op():
    rules = ng.parse_rules("op SumSq(x) = sum(x * x, out_axes=())\n", "t.rules")
    assert rules.ops == ("SumSq",)
    assert not ng.OPS["SumSq"].has("elementwise")
    x = ng.placeholder({"A": 2, "B": 3}, np.float64, name="x")
    node = ng.make_node("SumSq", (x,))
    assert node.axes == ng.make_axes(())
    xv = np.arange(6.0).reshape(2, 3)
    assert ng.execute([node], {x: xv})[0] == pytest.approx((xv * xv).sum())


def test_register_kernel_runs_fast_and_verification_checks_it_against_the_body():
    calls = []

    def fast(x):
        calls.append(x.shape)
        return x / (1.0 + np.exp(-x))

    ng.register_kernel("Silu", fast)  # before the declaration: kept until Silu is declared
    rules = ng.parse_rules(SILU, "silu.rules")
    x = ng.placeholder({"A": 3}, np.float64, name="x")
    ng.execute([ng.make_node("Silu", (x,))], {x: np.ones(3)})
    assert calls == [(3,)]
    report = ng.verify(rules, examples=10)
    assert report.ok and [k.op for k in report.kernels] == ["Silu"], report
    ng.register_kernel("Silu", lambda x: x / (1.0 + np.exp(x)))  # wrong sign
    bad = ng.verify(rules, examples=10)
    assert not bad.ok and "kernel Silu" in str(bad) and "max |fast - body|" in str(bad)


def test_register_kernel_refuses_ops_that_have_a_python_kernel():
    with pytest.raises(ng.OpError, match="register_op"):
        ng.register_kernel("Tanh", np.tanh)


def test_loading_a_file_twice_reuses_its_ops():
    first = ng.parse_rules(SILU, "silu.rules")
    second = ng.parse_rules(SILU, "silu.rules")
    assert first.ops == second.ops == ("Silu",)


@pytest.mark.parametrize(
    "text, message",
    [
        ("op Sigmoid(x) = x", "op 'Sigmoid' already exists"),
        ("op Foo(x) = Tahn(x)", "unknown op 'Tahn'"),
        ("op Foo(x) = x * y", "variable 'y' is never bound"),
        ("op Foo(x, k: shiny = 1) = x", "attribute 'k' has kind 'shiny'"),
        ("op Foo(k: float = 1.0, x) = x", "tensor parameter 'x' follows an attribute"),
        ("op Foo(k: float = 1.0) = 2", "needs at least one tensor parameter"),
        ("op Foo(x, x) = x", "parameter 'x' appears twice"),
        ("op foo(x) = x", "must start with a capital letter"),
        ("op Foo(x) = x\nop Foo(x) = x", "declared twice"),
    ],
)
def test_bad_declarations_are_located_errors_and_declare_nothing(text, message):
    before = set(ng.OPS)
    with pytest.raises(ng.RuleErrors) as info:
        ng.parse_rules(text + "\nop Fine(x) = x * 2\n", "bad.rules")
    assert message in str(info.value) and "bad.rules:" in str(info.value)
    assert set(ng.OPS) == before  # the well-formed `Fine` was taken back too


def test_a_different_redeclaration_is_an_error():
    ng.parse_rules(SILU, "silu.rules")
    with pytest.raises(ng.RuleErrors, match="already declared differently"):
        ng.parse_rules("op Silu(x) = x * Tanh(x)", "other.rules")


def test_a_bad_use_of_a_declared_op_is_an_op_error_pointing_into_its_body():
    ng.parse_rules("op Dotty(x, y) = axes_with_order(x, y.axes) + y\n", "d.rules")
    a, b = ng.placeholder({"A": 2}, name="a"), ng.placeholder({"B": 3}, name="b")
    with pytest.raises(ng.OpError, match="Dotty") as info:
        ng.make_node("Dotty", (a, b))
    assert info.value.span is not None and info.value.span.file == "d.rules"


def test_op_is_not_reserved_and_declarations_format_back():
    from ngrules.lang.formatter import format_decl
    from ngrules.lang.parser import parse

    text = "op Leaky(x, slope: float = 0.01) = Maximum(x, x * slope)"
    (decl,) = parse(text).decls
    assert format_decl(decl) == text and parse(format_decl(decl)).decls == (decl,)
    rules = ng.parse_rules('rule r: op * 1 if op.op == "Tanh" => op\n', "t.rules")
    assert len(rules) == 1


def test_the_documented_declarations_load_and_verify():
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "language.md").read_text(encoding="utf-8")
    block = text.split("## Declaring ops", 1)[1].split("```ngrules\n", 1)[1].split("```", 1)[0]
    rules = ng.parse_rules(block, "language.md")
    assert rules.ops == ("Silu", "Leaky", "Gelu", "SumDiff")
    report = ng.verify(rules, examples=10)
    assert report.ok and len(report) == 3, str(report)


def test_a_declaration_must_start_with_op():
    from ngrules.lang.parser import parse

    with pytest.raises(ng.RuleSyntaxError, match="unexpected name 'opp'") as info:
        parse("opp Silu(x) = x\n", "t.rules")
    assert str(info.value).startswith("t.rules:1:1:")
