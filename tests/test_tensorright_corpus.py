"""TensorRight's XLA rewrites stated in ngrules (tests/corpus/tensorright): every rule loads and
checks, and a sample is proved for every shape (the full run: bench/prove_tensorright.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

import ngrules as ng

CORPUS = Path(__file__).parent / "corpus" / "tensorright"


def test_every_rule_loads_and_the_table_counts_them():
    rules = ng.load_rules(CORPUS / "xla.rules").rules
    assert len(rules) == 78 and all(r.name.startswith("tr_") for r in rules)
    assert "| **total** | **121** | **78** |" in (CORPUS / "README.md").read_text()


@pytest.mark.parametrize(("name", "status"), [("tr_not_02", "proved"),  # IEEE, pointwise
                                              ("tr_reduce_05", "proved-reals")])  # groups
def test_a_sample_is_proved_for_every_shape(name, status):
    pytest.importorskip("z3")
    from ngrules.verification.prove import prove_rule

    v = prove_rule(ng.load_rules(CORPUS / "xla.rules").rule(name))
    assert v.status == status and v.bound is None, str(v)
    assert "every shape" in v.reason
