"""Verdicts and the verify command: what each verdict means, exit codes, the pytest mapping,
Ctrl-C, argument checks, --disable, and the classes of misses verification once had."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import InterruptedInDestructor

import ngrules as ng
from ngrules.cli.main import main
from ngrules.verification.pytest_plugin import RuleLoops, RuleVerificationFailed, outcome
from ngrules.verification.verify import Interrupted, verify, verify_rule

EXAMPLES = 15


def one(text: str, examples: int = EXAMPLES, **kw):
    rules = ng.parse_rules(text, "t.rules")
    return verify_rule(rules.rules[0], examples, **kw)


def test_a_term_hidden_under_the_tolerance_shows_in_the_derivative():  # issue 11, item 30
    v = one("rule r: Exp(Exp(Exp(Exp(Exp(x))))) + y => Exp(Exp(Exp(Exp(Exp(x)))))")
    assert v.status == "wrong"
    assert "derivatives with respect to y differ" in v.counterexample.problem
    assert "no longer uses y" in v.counterexample.problem


def test_commutativity_loops_but_is_not_wrong():
    v = one("rule r: x + y => y + x")
    assert v.status == "loops" and v.ok and "cycle" in v.reason


def test_a_looping_rule_whose_step_changes_values_is_wrong():
    v = one("rule r: x - y => y - x")
    assert v.status == "wrong" and "does not terminate" in v.counterexample.note
    cx = v.counterexample
    assert cx.expected[0].tolist() != cx.got[0].tolist()  # the two results really differ


def test_a_replacement_that_changes_axes_is_ill_formed():
    v = one("rule r: s @ Sum(x) if x.rank > 0 => x")  # a guard the static check cannot see past
    assert v.status == "ill-formed" and v.failed


def test_strict_semantics_keeps_nan_and_refinement_may_define_it():
    text = "rule r: x * (y / x) => y"
    assert one(text, examples=60).status == "wrong"  # x = 0 comes among the special values
    refined = one(text, semantics="refine")
    assert refined.status == "verified" and "(refinement)" in str(refined)


def test_negative_values_reach_a_composite_domain():
    assert one("rule r: Sqrt(x * x) => x").status == "wrong"


def test_leaky_slopes_are_drawn():
    assert one("rule r: Relu(x) => Maximum(x, 0)").status == "wrong"


def test_slices_below_the_root_are_built():
    v = one("rule r: -(s @ Slice(x)) => s")
    assert v.status == "wrong"


def test_rank_four_and_flattened_inputs_are_built():
    assert one("rule r: Exp(x) if len(x.axes) >= 4 => x + 1").status == "wrong"
    rule = ng.parse_rules("rule r: Unflatten(Flatten(x)) => x").rules[0]  # no guard
    assert verify_rule(rule, 40).status == "ill-formed"  # on an x with flattened axes


def test_a_guard_on_a_tiny_constant_is_built():
    v = one("rule r: x + Broadcast?(c: Constant) if c.rank == 0 and value(c) < 0.001 => x")
    assert v.status == "wrong"


def test_an_unverified_reason_names_the_guard_and_its_place():
    v = one("rule r: Exp(x) if size(x) > 100000 => Exp(x)")
    assert v.status == "unverified" and v.ok
    assert "`size(x) > 100000` at t.rules:1:" in v.reason and "attempts" in v.reason


def test_a_guard_that_outlasts_the_safety_net_says_so():  # issue 11, item 29
    def slow(x):
        time.sleep(0.3)
        return True

    ng.register_function("slow_guard_for_test", slow)
    v = one("rule r: Exp(x) if slow_guard_for_test(x) => Exp(x) * 1", budget=0.1)
    assert v.status == "unverified"
    assert "the safety net of 0.1 s stopped it after" in v.reason


def test_the_pytest_plugin_maps_verdicts_to_outcomes():
    with pytest.raises(RuleVerificationFailed):
        outcome(one("rule r: x * 2 => x"))
    with pytest.warns(RuleLoops):
        outcome(one("rule r: x + y => y + x"))
    with pytest.raises(pytest.skip.Exception, match="unverified"):
        outcome(one("rule r: Exp(x) if size(x) > 100000 => Exp(x)"))
    outcome(one("rule r: x * 1 => x"))  # passes


def test_ctrl_c_keeps_the_verdicts_computed_so_far():
    rules = ng.parse_rules("rule a: x * 1 => x\nrule b: x + 0 => x", "t.rules")

    def stop_at_second(i, n, rule):
        if i == 2:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as stopped:
        verify(rules, EXAMPLES, on_rule=stop_at_second)
    assert [v.rule.name for v in stopped.value.report] == ["a"]
    assert "(interrupted)" in str(stopped.value.report)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_ctrl_c_on_the_command_prints_verdicts_and_exits_130(tmp_path, signum):
    """Issue 11, item 31; issue 25: SIGTERM with stdout piped once lost every verdict."""
    rules = tmp_path / "r.rules"
    rules.write_text("".join(f"rule r{i}: x * 1 + {i} => x + {i}\n" for i in range(400)))
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "ngrules"), "verify", str(rules)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # some verdicts in, far from all 400 (also on a busy machine): a whole run of one such
    # rule, start-up included, takes 1.0 s of CPU (2026-12-04); 7 s was the old wall sleep
    _wait_for_cpu(proc, 3.0)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "verified      r0 " in out and "(interrupted)" in out
    assert "Traceback" not in err and "interrupted" in err


def _wait_for_cpu(proc, seconds: float, limit: float = 180.0) -> None:
    """Until `proc` has run for `seconds` of CPU time (where /proc tells; else of wall time),
    so a loaded machine does not interrupt it before it has done anything."""
    stat = Path(f"/proc/{proc.pid}/stat")
    if not stat.exists():
        time.sleep(seconds)
        return
    tick = os.sysconf("SC_CLK_TCK")
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        if (int(fields[11]) + int(fields[12])) / tick >= seconds:  # utime + stime
            return
        time.sleep(0.1)


def test_a_ctrl_c_lost_in_a_gc_callback_stops_verify_at_once(tmp_path, monkeypatch, capsys):
    # hypothesis runs a gc callback, where Python reports a Ctrl-C and goes on
    from ngrules.verification import verify as verify_module

    rules = tmp_path / "r.rules"
    rules.write_text("".join(f"rule r{i}: x * 1 + {i} => x + {i}\n" for i in range(30)))
    real = verify_module.verify_rule

    def verify_rule(rule, *args, **kwargs):
        if rule.name == "r1":
            InterruptedInDestructor()
        return real(rule, *args, **kwargs)

    monkeypatch.setattr(verify_module, "verify_rule", verify_rule)
    assert main(["verify", str(rules), "--examples", "5"]) == 130
    out, err = capsys.readouterr()
    assert "verified      r0 " in out and "(interrupted)" in out
    assert err == "ngrules: interrupted; the verdicts above are those computed so far\n"  # once
    assert "r1 " not in out  # stopped within r1, not after it (nor after all 30 rules)


def test_an_error_hypothesis_raises_while_a_ctrl_c_unwinds_is_an_interrupt(monkeypatch):
    from ngrules.verification import verify as verify_module

    def run_that_breaks_on_the_interrupt():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise AssertionError("the runner's state") from None  # as in hypothesis's own assert

    monkeypatch.setattr(verify_module, "_settings", lambda examples: lambda prop: prop)
    monkeypatch.setattr(verify_module, "_property", lambda *a: run_that_breaks_on_the_interrupt)
    rule = ng.parse_rules("rule r: x * 1 => x", "t.rules").rules[0]
    with pytest.raises(KeyboardInterrupt):
        verify_rule(rule, 5)


@pytest.mark.parametrize("bad", ["-3", "0", "many"])
def test_examples_must_be_a_positive_number(bad, capsys):  # issue 11, item 32
    with pytest.raises(SystemExit) as exit_:
        main(["verify", "--examples", bad])
    assert exit_.value.code == 2
    assert "--examples" in capsys.readouterr().err


def test_disable_leaves_rules_out_and_names_unknown_ones(tmp_path, capsys):
    path = tmp_path / "r.rules"
    path.write_text("rule good: x * 1 => x\nrule bad: x * 2 => x\n")
    assert main(["verify", str(path), "--examples", "5"]) == 1
    capsys.readouterr()
    assert main(["verify", str(path), "--examples", "5", "--disable", "bad"]) == 0
    out = capsys.readouterr().out
    assert "good" in out and "bad (" not in out
    assert main(["verify", str(path), "--disable", "god"]) == 2
    assert "--disable: no rule named 'god' (did you mean 'good'?)" in capsys.readouterr().err


def test_a_disabled_rule_no_longer_takes_the_nodes_of_the_rules_after_it():
    rules = ng.parse_rules(
        "rule first: x * 1 => x\nrule second: Exp(y) * 1 => Exp(y)\n", "t.rules")
    shadowed = verify(rules, 5)
    assert [v.status for v in shadowed] == ["verified", "unverified"]  # first takes every node
    (second,) = verify(rules, 5, disable=["first"])
    assert (second.rule.name, second.status) == ("second", "verified")
    with pytest.raises(ng.NgrulesError, match="no rule named 'frist' \\(did you mean 'first'"):
        verify(rules, 5, disable=["frist"])


def test_a_rule_set_without_some_rules_keeps_its_ops_and_pipelines():
    rules = ng.parse_rules(
        "op Twice(x) = x + x\npass p\nrule a: Twice(x) => x * 2\nrule b: x * 1 => x\n"
        "pipeline main: p\n", "t.rules")
    less = rules.without(["a"])
    assert [r.name for r in less] == ["b"] and [r.name for r in less.passes["p"]] == ["b"]
    assert (less.ops, less.pipelines) == (rules.ops, rules.pipelines)
    assert (less.ops, less.pipelines) == (("Twice",), {"main": ("p",)})


def test_no_progress_lines_when_stderr_is_not_a_terminal(tmp_path, capsys):
    path = tmp_path / "r.rules"
    path.write_text("rule good: x * 1 => x\n")
    assert main(["verify", str(path), "--examples", "5"]) == 0
    assert "[" not in capsys.readouterr().err


@pytest.mark.parametrize("big, out_of_range", [(1e6, True), (3.0, False)])
def test_a_softmax_that_underflows_to_zero_is_out_of_range(big, out_of_range):
    from ngrules.verification.compare import overflowed

    a, b = ng.make_axis(3, "a"), ng.make_axis(2, "b")
    x = ng.placeholder([a, b], name="x", dtype="float64")
    out = ng.log(ng.softmax(x, normalization_axes=[a]))
    values = np.array([[0.5, -1.0], [big, 0.25], [-2.0, 1.0]])
    assert overflowed([out], {x: values}) is out_of_range


def test_a_stable_log_softmax_is_not_judged_where_the_softmax_underflowed():
    rule = """rule r: Log(s @ Softmax(x))
        let r = s.normalization_axes
        let shifted = x - broadcast(Max(x, reduction_axes=r), x.axes)
        => shifted - broadcast(log(Sum(exp(shifted), reduction_axes=r)), x.axes)"""
    assert one(rule, floats="reals").status == "verified"  # in IEEE: -inf before, finite after
