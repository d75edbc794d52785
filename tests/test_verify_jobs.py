"""`verify(..., jobs=N)`: rules judged in forked workers keep the rules' order, each with its
verdict and figures, a wrong rule's counterexample printed as in one process."""

from __future__ import annotations

import subprocess
import sys

import ngrules as ng
from ngrules.verification.verify import verify

RULES = """
pass p
rule off: x * 2 => x + 1
rule one: x * 1 => x
"""


def test_workers_give_each_rule_its_verdict_in_order():
    shared = verify(ng.parse_rules(RULES, "j.rules"), 3, jobs=2)
    assert [(v.rule.name, v.status) for v in shared] == [("off", "wrong"), ("one", "verified")]
    assert shared["off"].failed and not shared.ok and shared["one"].examples >= 3
    assert "counterexample" in str(shared["off"]) and "j.rules:3" in str(shared["off"])
    assert "examples fired" in shared["one"].headline


#: Workers ended while alive, as `ngrules` runs them (SIGTERM raising KeyboardInterrupt): by
#: the pool's end after the verdicts wanted (what a loaded machine meets after the last one),
#: then by a Ctrl-C sent to the whole process group, as a terminal does.
ENDED_EARLY = """
import os, signal, time
import ngrules as ng
from ngrules.interrupts import terminating_as_interrupts
from ngrules.verification.verdicts import Verdict
from ngrules.verification.workers import judged

def judge(rule):
    time.sleep(0.2)
    return Verdict(rule, "verified")

text = "pass p\\n" + "".join(f"rule r{i}: x * {i} => {i} * x\\n" for i in range(4))
rules = [ng.parse_rules(text, "t.rules").rule(f"r{i}") for i in range(4)]
with terminating_as_interrupts():
    verdicts = judged(rules, judge, (), 2)
    print(next(verdicts).status)
    verdicts.close()
    verdicts = judged(rules, judge, (), 2)
    print(next(verdicts).status)
    try:
        os.killpg(os.getpgrp(), signal.SIGINT)
        time.sleep(5)
    except KeyboardInterrupt:
        verdicts.close()
        print("interrupted")
"""


def test_workers_ended_early_or_interrupted_print_no_traceback():
    done = subprocess.run([sys.executable, "-c", ENDED_EARLY], capture_output=True, text=True,
                          timeout=60, start_new_session=True)  # its own group for the Ctrl-C
    assert done.stdout.split() == ["verified", "verified", "interrupted"], done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr, done.stderr
