"""How many rules of each corpus the instance builder cannot build (issue 35, item 6).

A rule is unbuildable when no graph of its pattern is built within ATTEMPTS draws (its guards
aside: they are judged when the rule fires). Prints, per group, the count with its denominator
and the names. With --verify, every rule of the convolution corpus is also verified (20
examples) and its verdict checked against its folder (true: verified, wrong: wrong).
Run: PYTHONPATH=$PWD python bench/buildable.py [--attempts N] [--verify]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import ngrules as ng
from ngrules.verification.instances.sampling import buildable

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
GROUPS = {
    "conv corpus, wrong": [CORPUS / "conv" / "wrong"],
    "conv corpus, true": [CORPUS / "conv" / "true"],
    "wrong corpus": sorted((CORPUS / "wrong").glob("*.rules")),
    "true corpus": sorted((CORPUS / "true").glob("*.rules")),
    "library": [ROOT / "rules"],
}


def rules_of(paths) -> list:
    """The rules of the paths, a rule of a file imported twice once."""
    seen, rules = set(), []
    for path in paths:
        for rule in ng.load_rules(path).rules:
            if (rule.span.file, rule.span.line) not in seen:
                seen.add((rule.span.file, rule.span.line))
                rules.append(rule)
    return rules


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--attempts", type=int, default=30)
    parser.add_argument("--verify", action="store_true", help="verify the conv corpus too")
    args = parser.parse_args(argv)
    for group, paths in GROUPS.items():
        start = time.perf_counter()
        rules = rules_of(paths)
        unbuilt = [r.name for r in rules if not buildable(r, args.attempts)]
        took = time.perf_counter() - start
        print(f"{group}: {len(unbuilt)} of {len(rules)} unbuildable ({took:.1f} s) {unbuilt}")
    return verify_conv() if args.verify else 0


def verify_conv() -> int:
    """Verify every rule of the convolution corpus; 1 if a verdict is not its folder's."""
    from ngrules.verification.verify import verify

    off = 0
    for folder, status in (("true", "verified"), ("wrong", "wrong")):
        rules = rules_of([CORPUS / "conv" / folder])
        start = time.perf_counter()
        verdicts = [next(iter(verify([r], 20))) for r in rules]
        missed = [f"{r.name}: {v.status}" for r, v in zip(rules, verdicts) if v.status != status]
        off += len(missed)
        took = time.perf_counter() - start
        print(f"conv corpus, {folder}: {len(rules) - len(missed)} of {len(rules)} {status} "
              f"({took:.1f} s) {missed}")
    return int(off > 0)


if __name__ == "__main__":
    sys.exit(main())
