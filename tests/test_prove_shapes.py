"""Issue 35: a proof verdict never rests on sampled shapes. The wrong rules of
tests/corpus/wrong/class15_bounded_proofs.rules are right on the small shapes a sampler draws
first (a reduction over length 1, ranks up to 3) and wrong beyond: none is proved, and
`verify --prove` reports each as the testing finds it (wrong or ill-formed)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ngrules as ng

pytest.importorskip("z3")

from ngrules.verification.prove import prove_rule  # noqa: E402

TRAPS = Path(__file__).parent / "corpus" / "wrong" / "class15_bounded_proofs.rules"
#: Proved over drawn shapes before issue 35 ("proved for lengths <= 3 (... every axis order of
#: the 4 shapes drawn)"): max of sums, a transpose right up to rank 3, a wrong Dot split; and
#: "proved (...; elementwise: every shape)": a sum the builder skips below rank 4.
ONCE_PROVED = ("max_of_sum", "transpose_last_first", "dot_split_at_one", "sum_from_rank_four")


def test_the_axis_groups_argument_refuses_what_one_axis_per_group_hides():
    # one axis per group shows no axis order: a group is split in two axes to see it
    from ngrules.verification.prove.groups import every_shape

    (rule,) = _rules(["reorder_dropped"])
    structures, why = every_shape(rule)
    assert not structures and "ill-formed with a group of two axes" in why
    (rule,) = _rules(["max_of_sum"])
    structures, why = every_shape(rule)
    assert not structures and "did not prove it at a generic element" in why


def _rules(names):
    rules = {r.name: r for r in ng.load_rules(TRAPS).rules}
    return [rules[n] for n in names]


@pytest.mark.parametrize("rule", _rules(ONCE_PROVED), ids=lambda r: r.name)
def test_a_proof_over_drawn_shapes_is_no_proof(rule):
    v = prove_rule(rule)  # wrong when the special values catch it on a drawn shape
    assert v.status not in ("proved", "proved-reals", "loops"), str(v)
    if v.status == "proved-bounded":  # right up to rank 3: says so (and verify tests beyond)
        assert "proved for ranks <= 3 and lengths <= 3" in v.headline, str(v)
        assert rule.name in ("transpose_last_first", "sum_from_rank_four")
    else:
        assert v.failed or "a sample of shapes, not a proof" in v.reason, str(v)


def test_verify_with_prove_reports_the_failure_testing_finds(monkeypatch):
    from ngrules.verification import verify

    monkeypatch.setattr(verify, "SHRINK_CALLS", 10)  # the verdicts only: little shrinking
    # a rank-4 instance needs 40 examples; lengths <= 2 keep the enumeration short
    report = ng.verify(_rules(ONCE_PROVED), prove=True, bound=2)
    got = {v.rule.name: v.status for v in report}
    assert got == {"max_of_sum": "wrong", "transpose_last_first": "ill-formed",
                   "dot_split_at_one": "ill-formed", "sum_from_rank_four": "wrong"}, str(report)
    # the bounded proof says its bound; testing beyond it found the failure
    for name in ("transpose_last_first", "sum_from_rank_four"):
        assert report[name].note.startswith("z3 proved for ranks <= 3 and lengths <= 2")
        assert "testing failed" in report[name].headline
    note = report["dot_split_at_one"].note  # no proof claimed, and why
    assert "a sample of shapes, not a proof" in note or note.startswith("no proof: "), note


def _differ(lhs, rhs) -> bool:
    """Whether z3 finds the two graphs apart at a generic element (any length >= 1)."""
    import z3

    from ngrules.verification.prove.symbolic import Generic, element

    names = {a.name for n in ng.toposort([lhs, rhs]) for a in n.axes}
    g = Generic({n: z3.Real(f"n.{n}") for n in names})
    left, right = element([lhs, rhs], g)
    solver = z3.Solver()
    solver.add(*[z3.Real(f"n.{n}") >= 1 for n in names], left.v != right.v)
    return solver.check() == z3.sat


def test_a_generic_element_stands_for_every_length():
    import numpy as np

    a, r, s = (ng.make_axis(2, n) for n in "ars")
    x = ng.placeholder([a, r, s], name="x", dtype=np.float64)
    c = ng.broadcast(ng.placeholder([a], name="c", dtype=np.float64), x.axes)
    total = ng.sum(x, reduction_axes=[r, s])
    assert not _differ(ng.sum(x * c, reduction_axes=[r, s]), total * ng.broadcast(c.args[0], [a]))
    assert not _differ(ng.sum(ng.sum(x, reduction_axes=[r]), reduction_axes=[s]), total)
    assert _differ(ng.max(ng.sum(x, reduction_axes=[r]), reduction_axes=[s]), total)
    assert _differ(ng.max(x * c, reduction_axes=[r, s]),
                   ng.max(x, reduction_axes=[r, s]) * ng.broadcast(c.args[0], [a]))
    y = ng.placeholder([s], name="y", dtype=np.float64)  # s summed, then broadcast back: free
    back = ng.broadcast(ng.sum(y, reduction_axes=[s]), [r, s])
    xs = ng.placeholder([r, s], name="xs", dtype=np.float64)
    assert _differ(ng.sum(xs * back, reduction_axes=[r]),
                   ng.broadcast(ng.sum(xs * ng.broadcast(y, [r, s]), reduction_axes=[r, s]), [s]))
