"""A proof's budget (issue 37, F7): 40 declared ops, each the square of the one before (1.2 kB),
grew z3 to 3.3 GB. Terms too large are never handed to z3, z3's memory is capped per proof, and
the proof's CPU seconds are counted across its queries; each ends as `unverified`, naming the
budget."""

from __future__ import annotations

import resource
import time

import pytest

pytest.importorskip("z3")

import ngrules as ng  # noqa: E402
from ngrules.cli.main import main  # noqa: E402
from ngrules.verification.prove import prove_rule  # noqa: E402


def _squares(n: int) -> str:
    lines = ["op Sq0(x) = x * x"] + [f"op Sq{i}(x) = Sq{i - 1}(x) * Sq{i - 1}(x)"
                                     for i in range(1, n)]
    return "\n".join([*lines, "pass p", f"rule r: Sq{n - 1}(x) => Sq{n - 2}(x) * Sq{n - 2}(x)"])


def test_forty_squares_are_refused_before_z3_sees_them():
    rule = ng.parse_rules(_squares(40), "sq.rules").rules[0]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.process_time()
    verdict = prove_rule(rule)  # was 3.3 GB, then z3's out of memory
    assert verdict.status == "unverified"
    assert "too large: of degree more than 4,096" in verdict.reason
    assert time.process_time() - start < 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500_000  # kB


def test_the_memory_budget_is_z3s_and_named():
    rule = ng.parse_rules(_squares(3), "sq.rules").rules[0]
    spent = prove_rule(rule, budget=(30.0, 1))
    assert spent.status == "unverified"
    assert "memory budget of 1 MB (verify --prove-memory)" in spent.reason
    assert prove_rule(rule, budget=(30.0, 1024)).status == "proved-reals"  # z3 goes on


def test_the_time_budget_covers_the_whole_proof_and_is_named():
    rule = ng.parse_rules(_squares(3), "sq.rules").rules[0]
    spent = prove_rule(rule, budget=(0.001, 1024))
    assert spent.status == "unverified"
    assert "budget of 0.001 CPU seconds ran out (verify --prove-seconds)" in spent.reason


def test_the_command_line_takes_the_budget(tmp_path, capsys):
    path = tmp_path / "sq.rules"
    path.write_text(_squares(3))
    code = main(["verify", "--prove", "--prove-seconds", "0.001", "--examples", "2", str(path)])
    out = capsys.readouterr().out
    assert code in (0, 1) and "--prove-seconds" in out
    with pytest.raises(SystemExit) as refused:
        main(["verify", "--prove", "--prove-memory", "0", str(path)])
    assert refused.value.code == 2 and "--prove-memory" in capsys.readouterr().err


@pytest.mark.parametrize("seconds", ["inf", "1e400", "nan", "0", "-1", "soon"])
def test_the_proof_time_budget_is_a_positive_finite_number(tmp_path, capsys, seconds):
    path = tmp_path / "sq.rules"
    path.write_text(_squares(3))
    with pytest.raises(SystemExit) as refused:  # as every other `--*-seconds` option
        main(["verify", "--prove", "--prove-seconds", seconds, str(path)])
    err = capsys.readouterr().err
    assert refused.value.code == 2
    assert f"--prove-seconds: expected a positive number of seconds, got {seconds!r}" in err
