"""The hypothesis profiles ngrules tests and rule verification run under.

`ci` is derandomized with no deadline, so CI runs are repeatable; `dev` explores more.
Registered by `tests/conftest.py` and by the pytest plugin (so `pytest rules/` knows them).
"""

from __future__ import annotations


def register_profiles() -> None:
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ci",
        derandomize=True,
        deadline=None,
        max_examples=40,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    settings.register_profile("dev", deadline=None, max_examples=100)
